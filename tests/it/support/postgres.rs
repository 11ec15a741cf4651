//! The Postgres server the tests use (`TOOLD_TEST_POSTGRES_URL`) and a schema of a test's
//! own on it, so tests on one database run in parallel and leave nothing behind.

/// The server named by `TOOLD_TEST_POSTGRES_URL`. In CI (`CI=true`) a missing variable fails
/// the test; elsewhere the test is skipped with a note naming `what` it would have checked.
pub fn postgres_url(what: &str) -> Option<String> {
    match std::env::var("TOOLD_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            super::skip_unless_ci(&format!("TOOLD_TEST_POSTGRES_URL is not set ({what})"));
            None
        }
    }
}

/// A connection to `server`, failing the test with the URL when it cannot be reached.
pub async fn connect(server: &str) -> sqlx::PgConnection {
    use sqlx::Connection;
    sqlx::PgConnection::connect(server)
        .await
        .unwrap_or_else(|err| panic!("cannot reach TOOLD_TEST_POSTGRES_URL \"{server}\": {err}"))
}

/// A fresh schema `t_<uuid>` on a server, dropped (with everything in it) when this is.
pub struct TestSchema {
    server: String,
    pub name: String,
}

impl TestSchema {
    pub async fn create(server: &str) -> TestSchema {
        let name = format!("t_{}", uuid::Uuid::now_v7().simple());
        let mut connection = connect(server).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&mut connection)
            .await
            .expect("create the test schema");
        TestSchema {
            server: server.to_owned(),
            name,
        }
    }

    /// The server's URL with every connection's `search_path` set to this schema.
    pub fn url(&self) -> String {
        let separator = if self.server.contains('?') { '&' } else { '?' };
        format!(
            "{}{separator}options=-csearch_path%3D{}",
            self.server, self.name
        )
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // Dropping the schema needs async I/O, and `drop` runs inside the test's runtime: a
        // thread of its own with its own runtime does it.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let mut connection = connect(&server).await;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP SCHEMA IF EXISTS {name} CASCADE"
                )))
                .execute(&mut connection)
                .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(_))) {
            eprintln!("test schema {} not dropped: {dropped:?}", self.name);
        }
    }
}
