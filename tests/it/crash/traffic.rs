//! The crash loop's clients and what they saw: four clients, each with a session of its own,
//! send batches of `write_file` calls and long `bash` calls (some leaving a child behind, some
//! in the background; every shell's command line carries the loop's marker) until the daemon
//! dies under them. The [`Ledger`] records, on the client side, every result a client
//! received, every session it created and every keyed batch it sent without an answer: what
//! the checks after each restart hold the daemon to.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::http::harness::SseReader;

/// splitmix64: a seeded generator, so a failing run repeats with its printed seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a client knows of a session it created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    Open,
    Closed,
    /// Its close was cut off: the daemon may or may not have closed it.
    Closing,
}

/// A result a client received: its batch and call.
#[derive(Clone, Debug)]
pub struct Received {
    pub session: String,
    pub batch_id: String,
    pub call_id: String,
}

/// A keyed batch sent whose answer never came.
#[derive(Clone, Debug)]
pub struct Unanswered {
    pub session: String,
    pub body: Value,
    /// A streamed batch's id, from its response's headers.
    pub batch_id: Option<String>,
}

#[derive(Default)]
pub struct Ledger {
    pub sessions: Vec<(String, SessionState)>,
    pub received: Vec<Received>,
    pub unanswered: Vec<Unanswered>,
    /// Keyed batches cut off and retried after a restart.
    pub retried: usize,
    /// Calls of those that had no audit row until the retry settled them.
    pub unrecorded: usize,
}

impl Ledger {
    fn set_state(&mut self, session: &str, state: SessionState) {
        match self.sessions.iter_mut().find(|(id, _)| id == session) {
            Some(entry) => entry.1 = state,
            None => self.sessions.push((session.to_owned(), state)),
        }
    }

    fn state(&self, session: &str) -> Option<SessionState> {
        self.sessions
            .iter()
            .find(|(id, _)| id == session)
            .map(|(_, state)| *state)
    }
}

/// One client's traffic against the daemon at `base`, until a request fails on the wire
/// (the daemon was killed). A reply that is not a success fails the test: nothing this
/// client sends is refused by a healthy daemon.
pub struct Client {
    pub number: usize,
    pub marker: String,
    pub ledger: Arc<Mutex<Ledger>>,
    pub session: Option<String>,
    pub rng: Rng,
    pub batches: u64,
}

/// The daemon stopped answering (connection refused, reset, or cut mid-body).
struct Cut;

impl Client {
    pub async fn run(&mut self, base: &str) {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        while self.step(&http, base).await.is_ok() {}
    }

    async fn step(&mut self, http: &reqwest::Client, base: &str) -> Result<(), Cut> {
        let session = match self.session.clone() {
            Some(session) => session,
            None => self.create_session(http, base).await?,
        };
        // A close cut off by the kill is sent again first: the daemon may have closed the
        // session before it died, so nothing else may be sent to it.
        let cut_close = self.ledger.lock().unwrap().state(&session) == Some(SessionState::Closing);
        if cut_close || self.rng.below(20) == 0 {
            return self.close_session(http, base, &session, cut_close).await;
        }
        let body = self.batch_body();
        if self.rng.below(4) == 0 {
            self.streamed_batch(http, base, &session, body).await
        } else {
            self.whole_batch(http, base, &session, body).await
        }
    }

    async fn create_session(&mut self, http: &reqwest::Client, base: &str) -> Result<String, Cut> {
        let body = json!({"permission_mode": "workspace_write"});
        let reply = http
            .post(format!("{base}/v1/sessions"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .send()
            .await
            .map_err(|_| Cut)?;
        let (status, body) = read(reply).await?;
        assert_eq!(status, StatusCode::CREATED, "create a session: {body}");
        let id = body["id"].as_str().unwrap().to_owned();
        self.ledger
            .lock()
            .unwrap()
            .set_state(&id, SessionState::Open);
        self.session = Some(id.clone());
        Ok(id)
    }

    /// Closes `session`; `again`: its earlier close was cut off, so the daemon may have closed
    /// it already (404).
    async fn close_session(
        &mut self,
        http: &reqwest::Client,
        base: &str,
        session: &str,
        again: bool,
    ) -> Result<(), Cut> {
        self.ledger
            .lock()
            .unwrap()
            .set_state(session, SessionState::Closing);
        let sent = http
            .delete(format!("{base}/v1/sessions/{session}"))
            .send()
            .await
            .map_err(|_| Cut)?;
        let (status, body) = read(sent).await?;
        let closed_before = again && status == StatusCode::NOT_FOUND;
        assert!(
            status == StatusCode::OK || closed_before,
            "close {session}: {status} {body}"
        );
        self.ledger
            .lock()
            .unwrap()
            .set_state(session, SessionState::Closed);
        self.session = None;
        Ok(())
    }

    /// One to four calls: writes, a shell that sleeps, a shell that leaves a child behind (in
    /// its process group, or in a session of its own), a background shell; a third of the batches carry an idempotency key.
    fn batch_body(&mut self) -> Value {
        self.batches += 1;
        let marker = &self.marker;
        let batch = format!("c{}b{}", self.number, self.batches);
        let calls: Vec<Value> = (0..1 + self.rng.below(4))
            .map(|i| {
                let id = format!("{batch}k{i}");
                let (name, input) = match self.rng.below(5) {
                    0 => (
                        "write_file",
                        json!({"file_path": format!("{id}.txt"), "content": format!("{id}\n")}),
                    ),
                    1 => (
                        "bash",
                        json!({"command": format!("(exec -a {marker} sleep 0.2); echo done")}),
                    ),
                    2 => (
                        "bash",
                        json!({"command": format!("(exec -a {marker} sleep 30) & echo $!")}),
                    ),
                    // A process group and session of its own, escaping the shell's.
                    3 => (
                        "bash",
                        json!({"command": format!("setsid -f bash -c 'exec -a {marker} sleep 30'; echo ok")}),
                    ),
                    _ => (
                        "bash",
                        json!({"command": format!("exec -a {marker} sleep 30"),
                               "run_in_background": true}),
                    ),
                };
                json!({"id": id, "name": name, "input": input})
            })
            .collect();
        let mut body = json!({"calls": calls});
        if self.rng.below(3) == 0 {
            body["idempotency_key"] = json!(format!("{marker}-{batch}"));
        }
        body
    }

    async fn whole_batch(
        &mut self,
        http: &reqwest::Client,
        base: &str,
        session: &str,
        body: Value,
    ) -> Result<(), Cut> {
        let sent = http
            .post(format!("{base}/v1/sessions/{session}/batches"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .send()
            .await;
        let answer = match sent {
            Ok(reply) => read(reply).await,
            Err(_) => Err(Cut),
        };
        let Ok((status, answer)) = answer else {
            self.unanswered(session, body, None);
            return Err(Cut);
        };
        assert_eq!(status, StatusCode::OK, "batch in {session}: {answer}");
        self.received(session, &answer);
        Ok(())
    }

    /// A batch over SSE: each result is recorded as it arrives.
    async fn streamed_batch(
        &mut self,
        http: &reqwest::Client,
        base: &str,
        session: &str,
        body: Value,
    ) -> Result<(), Cut> {
        let sent = http
            .post(format!("{base}/v1/sessions/{session}/batches"))
            .header("accept", "text/event-stream")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .send()
            .await;
        let Ok(response) = sent else {
            self.unanswered(session, body, None);
            return Err(Cut);
        };
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "streamed batch in {session}"
        );
        let mut frames = SseReader::new(response);
        let batch_id = frames.headers["x-toold-batch-id"]
            .to_str()
            .unwrap()
            .to_owned();
        loop {
            match frames.try_next().await {
                Ok(Some(frame)) if frame.event == "result" => {
                    let call_id = frame.data["id"].as_str().unwrap().to_owned();
                    self.ledger.lock().unwrap().received.push(Received {
                        session: session.to_owned(),
                        batch_id: batch_id.clone(),
                        call_id,
                    });
                }
                Ok(Some(frame)) if frame.event == "done" => return Ok(()),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    self.unanswered(session, body, Some(batch_id));
                    return Err(Cut);
                }
            }
        }
    }

    fn received(&self, session: &str, answer: &Value) {
        let batch_id = answer["batch_id"].as_str().unwrap();
        let mut ledger = self.ledger.lock().unwrap();
        for result in answer["results"].as_array().unwrap() {
            ledger.received.push(Received {
                session: session.to_owned(),
                batch_id: batch_id.to_owned(),
                call_id: result["id"].as_str().unwrap().to_owned(),
            });
        }
    }

    fn unanswered(&self, session: &str, body: Value, batch_id: Option<String>) {
        if body.get("idempotency_key").is_some() {
            self.ledger.lock().unwrap().unanswered.push(Unanswered {
                session: session.to_owned(),
                body,
                batch_id,
            });
        }
    }
}

/// A reply's status and JSON body; a body cut off is the daemon dying.
async fn read(reply: reqwest::Response) -> Result<(StatusCode, Value), Cut> {
    let status = reply.status();
    let bytes = reply.bytes().await.map_err(|_| Cut)?;
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}
