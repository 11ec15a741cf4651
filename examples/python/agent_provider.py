"""A sub-agent provider for toold's `agent` tool, in Python over gRPC, with a scripted "model".

Connects to toold's ToolService.ProvideTools as the provider `agent`. For each Invoke of the
tool `agent`, it runs a fixed plan of tool calls in the child session toold opened for the
call (the invocation's child_session: its id and a token scoped to it), calling back into
toold over gRPC with that token, and answers with a summary of what the calls returned. No
model service is needed: the "model" is `plan()` below. A real sub-agent replaces `plan()` and
the loop in `run_agent()` with a model loop: send the prompt and the child session's tool
definitions (ListTools in the model's format) to the model, run the tool calls it emits with
ExecuteBatch in the child session, feed the results back, until it answers with text.

    python agent_provider.py 127.0.0.1:7070 [--token TOKEN] [--wider] [--long-bash] [--probe]

--token: the provider's own token (registering as `agent`); the child calls use the child
token from each invocation, never this one. --wider adds a call that needs a wider mode than
the parent session's (a write outside the workspace: danger_full_access), which toold denies.
--long-bash makes the plan's bash call run for minutes (an interrupt test cancels it); --probe
(for tests) also tries the child token where toold must refuse it and reports the answers. Each
Cancel from toold stops the invocation's plan: its running call is cancelled and no result is
sent. Stubs are generated from ../../proto/toold/v1/toold.proto at start (see client.py).
Prints `registered` once toold accepted the registration, then a line per invocation.
"""

import argparse
import json
import os
import sys
import tempfile
import threading

import grpc

from client import load_stubs, request_stream

TIMEOUT_S = 120
PROVIDER = "agent"


def plan(prompt, wider, long_bash):
    """The scripted "model": the calls to make, in order, as (id, tool, input)."""
    steps = [
        ("write", "write_file", {"file_path": "agent_note.txt", "content": prompt + "\n"}),
        ("bash", "bash", {"command": "sleep 600" if long_bash else "wc -c agent_note.txt"}),
    ]
    if wider:
        outside = os.path.join(tempfile.gettempdir(), f"toold-agent-outside-{os.getpid()}.txt")
        steps.insert(1, ("outside", "write_file", {"file_path": outside, "content": "x"}))
    return steps


class Invocation:
    """One running `agent` call: its plan runs on a thread of its own until done or cancelled."""

    def __init__(self, pb, stub, invoke, send, args):
        self.pb, self.stub, self.invoke, self.send, self.args = pb, stub, invoke, send, args
        self.cancelled = threading.Event()
        self.running = None  # the in-flight ExecuteBatch future, to cancel it
        self.lock = threading.Lock()

    def cancel(self, reason):
        print(f"cancel {self.invoke.invocation_id}: {reason}", flush=True)
        with self.lock:
            self.cancelled.set()
            if self.running is not None:
                self.running.cancel()

    def run(self):
        try:
            summary = self.run_agent()
        except Exception as err:  # the call fails as data; the provider lives on
            if self.cancelled.is_set():
                return
            self.answer(f"agent failed: {err}", True)
            return
        if summary is not None:
            self.answer(json.dumps(summary), False)

    def run_agent(self):
        """Runs the plan in the child session; the summary, or None once cancelled."""
        child = self.invoke.child_session
        if not child.session_id or not child.token:
            raise RuntimeError("the invocation carries no child session")
        request = json.loads(self.invoke.input_json or "{}")
        metadata = [("authorization", f"Bearer {child.token}")]
        steps = []
        for call_id, tool, tool_input in plan(request.get("prompt", ""), self.args.wider,
                                              self.args.long_bash):
            if self.cancelled.is_set():
                return None
            self.progress({"step": call_id, "tool": tool})
            batch = self.pb.ExecuteBatchRequest(session_id=child.session_id, calls=[
                self.pb.ToolCall(id=call_id, name=tool, input_json=json.dumps(tool_input))])
            with self.lock:
                if self.cancelled.is_set():
                    return None
                self.running = self.stub.ExecuteBatch.future(
                    batch, metadata=metadata, timeout=TIMEOUT_S * 10)
            try:
                result = self.running.result().results[0]
            except grpc.FutureCancelledError:
                return None
            steps.append({"id": call_id, "tool": tool, "is_error": result.is_error,
                          "error_kind": result.error_kind, "output": result.output[:400]})
        summary = {"session_id": child.session_id,
                   "description": request.get("description", ""), "steps": steps}
        if self.args.probe:
            summary["probes"] = self.probe(metadata)
        return summary

    def probe(self, metadata):
        """Uses the child token where toold must refuse it; the status code of each answer."""
        pb, parent = self.pb, self.invoke.session_id
        attempts = {
            "list_parent_tools": lambda: self.stub.ListTools(
                pb.ListToolsRequest(session_id=parent, format="toold"), metadata=metadata),
            "run_in_parent": lambda: self.stub.ExecuteBatch(pb.ExecuteBatchRequest(
                session_id=parent, calls=[pb.ToolCall(id="p", name="read_file",
                                                      input_json='{"file_path": "x"}')]),
                metadata=metadata),
            "create_session": lambda: self.stub.CreateSession(
                pb.CreateSessionRequest(), metadata=metadata),
        }
        answers = {}
        for name, attempt in attempts.items():
            try:
                attempt()
                answers[name] = "OK"
            except grpc.RpcError as err:
                answers[name] = err.code().name
        return answers

    def progress(self, data):
        self.send(self.pb.ProvideToolsRequest(progress=self.pb.InvokeProgress(
            invocation_id=self.invoke.invocation_id, data_json=json.dumps(data))))

    def answer(self, output, is_error):
        print(f"result {self.invoke.invocation_id} is_error={is_error}", flush=True)
        self.send(self.pb.ProvideToolsRequest(result=self.pb.InvokeResult(
            invocation_id=self.invoke.invocation_id, output=output, is_error=is_error)))


def serve(pb, stub, args):
    outgoing, requests = request_stream()
    metadata = [("authorization", f"Bearer {args.token}")] if args.token else []
    outgoing.put(pb.ProvideToolsRequest(register=pb.ProviderRegistration(provider=PROVIDER)))
    running = {}
    for response in stub.ProvideTools(requests, metadata=metadata):
        kind = response.WhichOneof("kind")
        if kind == "registered":
            print(f"registered {response.registered.connection_id}", flush=True)
        elif kind == "invoke":
            invoke = response.invoke
            print(f"invoke {invoke.invocation_id} {invoke.tool} child "
                  f"{invoke.child_session.session_id}", flush=True)
            if invoke.tool != "agent":
                outgoing.put(pb.ProvideToolsRequest(result=pb.InvokeResult(
                    invocation_id=invoke.invocation_id, is_error=True,
                    output=f"unknown tool \"{invoke.tool}\"; this provider runs \"agent\"")))
                continue
            invocation = Invocation(pb, stub, invoke, outgoing.put, args)
            running[invoke.invocation_id] = invocation
            threading.Thread(target=invocation.run, daemon=True).start()
        elif kind == "cancel":
            invocation = running.pop(response.cancel.invocation_id, None)
            if invocation is not None:
                invocation.cancel(response.cancel.reason)
    outgoing.put(None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", help="host:port of toold")
    parser.add_argument("--token", help="bearer token to register with, when the daemon has tokens")
    parser.add_argument("--wider", action="store_true",
                        help="the plan includes a call needing a wider mode than the parent's")
    parser.add_argument("--long-bash", action="store_true",
                        help="the plan's bash call runs for minutes (until cancelled)")
    parser.add_argument("--probe", action="store_true",
                        help="for tests: also try the child token on the parent session and to "
                             "create a session, and report toold's answers in the summary")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toold-stubs-") as out_dir:
        pb, pb_grpc = load_stubs(out_dir)
        with grpc.insecure_channel(args.address) as channel:
            grpc.channel_ready_future(channel).result(timeout=TIMEOUT_S)
            try:
                serve(pb, pb_grpc.ToolServiceStub(channel), args)
            except grpc.RpcError as err:
                sys.exit(f"ProvideTools ended: {err.code()}: {err.details()}")


if __name__ == "__main__":
    main()
