"""A small toold client in Python over gRPC.

Generates the stubs from ../../proto/toold/v1/toold.proto with grpcio-tools into a temporary
directory when it runs (generated code is not committed), then: creates a session, lists its
tools in Anthropic format, runs a batch (a write and a read), streams a batch call by call with
Execute, and reads those events back with Subscribe. Every step is checked; any surprise exits
non-zero.

    python client.py 127.0.0.1:7070 [--token TOKEN] [--ca-cert CA.pem]

With --ca-cert the channel is TLS (a daemon started with --tls-cert and --tls-key), trusting
the CA certificates in that PEM file; without it, plain HTTP/2.
"""

import argparse
import json
import os
import queue
import sys
import tempfile

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "..", "proto")
TIMEOUT_S = 60


def load_stubs(out_dir):
    """Runs protoc (from grpcio-tools) on toold.proto and imports the generated modules."""
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    code = protoc.main([
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        os.path.join(PROTO_ROOT, "toold", "v1", "toold.proto"),
    ])
    if code != 0:
        sys.exit(f"protoc failed with {code}")
    sys.path.insert(0, out_dir)
    from toold.v1 import toold_pb2, toold_pb2_grpc  # noqa: E402  (generated just now)
    return toold_pb2, toold_pb2_grpc


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", help="host:port of toold")
    parser.add_argument("--token", help="bearer token, when the daemon has tokens")
    parser.add_argument("--ca-cert", help="PEM CA certificates: connect over TLS trusting them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toold-stubs-") as out_dir:
        pb, pb_grpc = load_stubs(out_dir)
        metadata = [("authorization", f"Bearer {args.token}")] if args.token else []
        with open_channel(args.address, args.ca_cert) as channel:
            grpc.channel_ready_future(channel).result(timeout=TIMEOUT_S)
            run(pb, pb_grpc.ToolServiceStub(channel), metadata)
    print("python example: ok")


def open_channel(address, ca_cert):
    """A plain channel, or a TLS one trusting the CA certificates in `ca_cert`."""
    if not ca_cert:
        return grpc.insecure_channel(address)
    with open(ca_cert, "rb") as file:
        credentials = grpc.ssl_channel_credentials(root_certificates=file.read())
    return grpc.secure_channel(address, credentials)


def run(pb, stub, metadata):
    kw = {"metadata": metadata, "timeout": TIMEOUT_S}

    session = stub.CreateSession(pb.CreateSessionRequest(
        options_json=json.dumps({"metadata": {"client": "examples/python"}})), **kw)
    print(f"session {session.id} in {session.working_directory} ({session.permission_mode})")

    tools = json.loads(stub.ListTools(
        pb.ListToolsRequest(session_id=session.id, format="anthropic"), **kw).tools_json)
    names = [tool["name"] for tool in tools]
    check("read_file" in names and "write_file" in names, f"tools: {names}")
    check(all("input_schema" in tool for tool in tools), "anthropic definitions")
    print(f"{len(tools)} tools in anthropic format")

    path = os.path.join(session.working_directory, "hello.txt")
    batch = stub.ExecuteBatch(pb.ExecuteBatchRequest(session_id=session.id, calls=[
        pb.ToolCall(id="w", name="write_file",
                    input_json=json.dumps({"file_path": path, "content": "hello from python\n"})),
        pb.ToolCall(id="r", name="read_file", input_json=json.dumps({"file_path": path})),
    ]), **kw)
    check([r.id for r in batch.results] == ["w", "r"], f"results in order: {batch.results}")
    check(not any(r.is_error for r in batch.results), f"no errors: {batch.results}")
    check("hello from python" in batch.results[1].output, batch.results[1].output)
    print(f"batch {batch.batch_id}: {[r.id for r in batch.results]}")

    streamed_batch, streamed = execute_stream(pb, stub, session.id, path, kw)
    print(f"stream {streamed_batch}: {streamed}")

    # Everything the session did, replayed from the start, up to the second batch's end.
    seen = []
    events = stub.Subscribe(pb.SubscribeRequest(session_id=session.id, after_seq=0), **kw)
    for event in events:
        seen.append((event.type, event.batch_id, event.call_id))
        if event.type == "batch:end" and event.batch_id == streamed_batch:
            events.cancel()
            break
    posts = {(batch_id, call_id) for kind, batch_id, call_id in seen if kind == "tool:post"}
    for wanted in [(batch.batch_id, "w"), (batch.batch_id, "r"),
                   (streamed_batch, "s1"), (streamed_batch, "s2")]:
        check(wanted in posts, f"tool:post for {wanted} in {seen}")
    check(seen[0][0] == "session:start", f"replay starts at the session: {seen[:3]}")
    print(f"subscribe: {len(seen)} events")

    stub.CloseSession(pb.CloseSessionRequest(session_id=session.id), **kw)


def request_stream():
    """A queue and the iterator of its items a streaming RPC sends (None ends it)."""
    outgoing = queue.Queue()

    def requests():
        while True:
            item = outgoing.get()
            if item is None:
                return
            yield item

    return outgoing, requests()


def execute_stream(pb, stub, session_id, path, kw):
    """Sends call s1, waits until the server reports it ran, then sends s2 and the end."""
    outgoing, requests = request_stream()
    outgoing.put(pb.ExecuteRequest(start=pb.ExecuteStart(session_id=session_id)))
    outgoing.put(pb.ExecuteRequest(call=pb.ToolCall(
        id="s1", name="read_file", input_json=json.dumps({"file_path": path}))))
    results, batch_id, sent_s2 = [], None, False
    for response in stub.Execute(requests, **kw):
        kind = response.WhichOneof("kind")
        if kind == "event" and response.event.type == "tool:post" and response.event.call_id == "s1":
            check(not sent_s2, "s1 finished before s2 was sent")
            outgoing.put(pb.ExecuteRequest(call=pb.ToolCall(
                id="s2", name="bash", input_json=json.dumps({"command": "wc -l hello.txt"}))))
            outgoing.put(pb.ExecuteRequest(end=pb.ExecuteEnd()))
            outgoing.put(None)
            sent_s2 = True
        elif kind == "result":
            check(not response.result.is_error, response.result.output)
            results.append(response.result.id)
        elif kind == "done":
            batch_id = response.done.batch_id
    check(results == ["s1", "s2"], f"stream results in order: {results}")
    check(batch_id, "the stream ends with done")
    return batch_id, results


if __name__ == "__main__":
    main()
