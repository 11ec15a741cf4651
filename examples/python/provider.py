"""A toold tool provider in Python over gRPC (DESIGN §11).

Connects with ToolService.ProvideTools, registers two tools, and serves their invocations,
each on its own thread, until toold or the user ends the stream:

- `echo` (read-only, parallel-safe): answers `{"echo": text, "started_ms", "ended_ms",
  "connection"}` after `sleep_ms` (default 0), reporting progress `{"stage": "started"}` first.
  The timestamps let a test see that parallel calls overlapped.
- `slow` (workspace_write, cancels on interrupt): waits `seconds` (default 3600) unless toold
  sends `Cancel`, which it honours at once (and prints `cancel INVOCATION_ID REASON`).

Stubs are generated from ../../proto/toold/v1/toold.proto with grpcio-tools at run time.

    python provider.py 127.0.0.1:7070 [--token TOKEN] [--provider demo] [--global]
                       [--timeout-ms N] [--tools echo,slow]

It prints `registered CONNECTION_ID TOOL...` once registered, `invoke TOOL CALL_ID` for each
call and `cancel INVOCATION_ID REASON` for each cancel; a refused registration prints
`refused CODE MESSAGE` and exits 2.
"""

import argparse
import json
import queue
import sys
import tempfile
import threading
import time

import grpc

from client import load_stubs  # the stubs, generated as the gRPC example does


def say(*words):
    print(*words, flush=True)


def now_ms():
    return int(time.time() * 1000)


def tool_specs(pb, args):
    echo = pb.ProvidedToolSpec(
        name="echo",
        description="Echoes `text` back, after `sleep_ms` milliseconds.",
        input_schema_json=json.dumps({
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "sleep_ms": {"type": "integer", "minimum": 0},
            },
            "required": ["text"],
            "additionalProperties": False,
        }),
        read_only=True,
        concurrency_safe=True,
        destructive=False,
        required_permission="read_only",
        interrupt_behavior="cancel",
        timeout_ms=args.timeout_ms,
    )
    slow = pb.ProvidedToolSpec(
        name="slow",
        description="Waits `seconds` seconds, unless cancelled.",
        input_schema_json=json.dumps({
            "type": "object",
            "properties": {"seconds": {"type": "number", "minimum": 0}},
            "additionalProperties": False,
        }),
        required_permission="workspace_write",
        interrupt_behavior="cancel",
        timeout_ms=args.timeout_ms,
    )
    wanted = args.tools.split(",")
    return [spec for spec in (echo, slow) if spec.name in wanted]


class Provider:
    def __init__(self, pb, connection_name):
        self.pb = pb
        self.outgoing = queue.Queue()
        self.cancelled = {}
        self.lock = threading.Lock()
        self.connection = connection_name

    def requests(self, registration):
        yield self.pb.ProvideToolsRequest(register=registration)
        while True:
            message = self.outgoing.get()
            if message is None:
                return
            yield message

    def send_result(self, invocation_id, output, is_error=False):
        self.outgoing.put(self.pb.ProvideToolsRequest(result=self.pb.InvokeResult(
            invocation_id=invocation_id, output=output, is_error=is_error)))

    def send_progress(self, invocation_id, data):
        self.outgoing.put(self.pb.ProvideToolsRequest(progress=self.pb.InvokeProgress(
            invocation_id=invocation_id, data_json=json.dumps(data))))

    def run(self, invoke):
        event = threading.Event()
        with self.lock:
            self.cancelled[invoke.invocation_id] = event
        try:
            arguments = json.loads(invoke.input_json or "{}")
            if invoke.tool == "echo":
                started = now_ms()
                self.send_progress(invoke.invocation_id, {"stage": "started"})
                if event.wait(arguments.get("sleep_ms", 0) / 1000):
                    return
                self.send_result(invoke.invocation_id, json.dumps({
                    "echo": arguments["text"],
                    "started_ms": started,
                    "ended_ms": now_ms(),
                    "connection": self.connection,
                }))
            elif invoke.tool == "slow":
                if event.wait(arguments.get("seconds", 3600)):
                    return
                self.send_result(invoke.invocation_id, "done waiting")
            else:
                self.send_result(invoke.invocation_id, f"no tool {invoke.tool}", True)
        finally:
            with self.lock:
                self.cancelled.pop(invoke.invocation_id, None)

    def cancel(self, cancel):
        say("cancel", cancel.invocation_id, cancel.reason.replace(" ", "_"))
        with self.lock:
            event = self.cancelled.get(cancel.invocation_id)
        if event is not None:
            event.set()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", help="host:port of toold")
    parser.add_argument("--token", help="bearer token, when the daemon has tokens")
    parser.add_argument("--provider", default="demo", help="the provider name")
    parser.add_argument("--global", dest="is_global", action="store_true",
                        help="offer the tools to every session (admin tokens only)")
    parser.add_argument("--timeout-ms", type=int, default=0,
                        help="the tools' timeout (0: toold's default)")
    parser.add_argument("--tools", default="echo,slow", help="which tools to declare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toold-stubs-") as out_dir:
        pb, pb_grpc = load_stubs(out_dir)
        metadata = [("authorization", f"Bearer {args.token}")] if args.token else []
        with grpc.insecure_channel(args.address) as channel:
            stub = pb_grpc.ToolServiceStub(channel)
            registration = pb.ProviderRegistration(
                provider=args.provider, tools=tool_specs(pb, args), **{"global": args.is_global})
            provider = Provider(pb, "")
            responses = stub.ProvideTools(provider.requests(registration), metadata=metadata)
            try:
                for response in responses:
                    kind = response.WhichOneof("kind")
                    if kind == "registered":
                        provider.connection = response.registered.connection_id
                        say("registered", response.registered.connection_id,
                            *response.registered.tools)
                    elif kind == "invoke":
                        say("invoke", response.invoke.tool, response.invoke.call_id)
                        threading.Thread(target=provider.run, args=(response.invoke,),
                                         daemon=True).start()
                    elif kind == "cancel":
                        provider.cancel(response.cancel)
            except grpc.RpcError as err:
                say("refused" if provider.connection == "" else "ended",
                    err.code().name, err.details())
                sys.exit(2 if provider.connection == "" else 1)
            finally:
                provider.outgoing.put(None)


if __name__ == "__main__":
    main()
