"""toold over HTTPS with `requests`, trusting a test CA (tests/it/tls/clients.rs runs it).

    python requests_client.py https://127.0.0.1:PORT ca.pem

Checks /healthz, creates a session, runs a batch (a write and a read, over one keep-alive
connection), reads the session back and closes it. Any surprise exits non-zero.
"""

import sys

import requests

TIMEOUT_S = 60


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    base, ca = sys.argv[1], sys.argv[2]
    # `verify` on each request: a session's own is overridden by REQUESTS_CA_BUNDLE.
    kw = {"verify": ca, "timeout": TIMEOUT_S}
    with requests.Session() as http:
        health = http.get(f"{base}/healthz", **kw)
        check(health.status_code == 200, f"healthz: {health.status_code} {health.text}")

        created = http.post(f"{base}/v1/sessions", json={"metadata": {"client": "requests"}}, **kw)
        check(created.status_code in (200, 201), f"create: {created.status_code} {created.text}")
        session = created.json()
        path = f"{session['working_directory']}/tls.txt"

        batch = http.post(f"{base}/v1/sessions/{session['id']}/batches", json={"calls": [
            {"id": "w", "name": "write_file", "input": {"file_path": path, "content": "over tls\n"}},
            {"id": "r", "name": "read_file", "input": {"file_path": path}},
        ]}, **kw)
        check(batch.status_code == 200, f"batch: {batch.status_code} {batch.text}")
        results = batch.json()["results"]
        check([r["id"] for r in results] == ["w", "r"], f"results in order: {results}")
        check(not any(r["is_error"] for r in results), f"no errors: {results}")
        check("over tls" in results[1]["output"], results[1]["output"])

        shown = http.get(f"{base}/v1/sessions/{session['id']}", **kw)
        check(shown.status_code == 200, f"inspect: {shown.status_code} {shown.text}")
        closed = http.delete(f"{base}/v1/sessions/{session['id']}", **kw)
        check(closed.status_code in (200, 204), f"close: {closed.status_code} {closed.text}")
    print("requests over tls: ok")


if __name__ == "__main__":
    main()
