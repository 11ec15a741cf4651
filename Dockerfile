# Builds toold in a Rust image and ships it in a slim Debian image: non-root, bubblewrap for the
# shell sandbox, tini as init (toold does not reap orphaned grandchildren), the migrations and
# the default settings beside the binary. deploy/check_dockerfile.sh (run by .ci/run) builds from
# exactly what the build stage copies, so a path the build needs and this file omits fails CI.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
COPY src ./src
COPY benches ./benches
COPY migrations ./migrations
RUN cargo build --release --locked --bin toold

# Environments (DESIGN §12, deploy/README.md "Environments in a container"): the bwrap tier
# needs unprivileged user namespaces or CAP_SYS_ADMIN, an overlay root per session needs
# CAP_SYS_ADMIN (else a full copy), and the gvisor tier needs runsc on PATH (not installed
# here) with what runsc needs (CAP_SYS_ADMIN; /dev/kvm for its kvm platform).
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates bubblewrap tini curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/toold --create-home toold
COPY --from=build /src/target/release/toold /usr/local/bin/toold
# Migrations are compiled into the binary; the SQL ships too, for review and manual runs.
COPY migrations /usr/share/toold/migrations
COPY config/toold.toml /etc/toold/toold.toml
ENV TOOLD_CONFIG=/etc/toold/toold.toml \
    TOOLD_DATA_DIR=/var/lib/toold \
    TOOLD_LISTEN=0.0.0.0:7070
USER toold
WORKDIR /var/lib/toold
EXPOSE 7070
HEALTHCHECK --interval=10s --timeout=3s CMD curl -fsS http://127.0.0.1:7070/readyz || exit 1
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/toold"]
CMD ["serve"]
