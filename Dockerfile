# Builds the toold binary in a Rust image and ships it in a slim Debian image.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked --bin toold

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/toold /usr/local/bin/toold
COPY config/toold.toml /etc/toold/toold.toml
ENV TOOLD_CONFIG=/etc/toold/toold.toml
ENTRYPOINT ["/usr/local/bin/toold"]
CMD ["settings"]
