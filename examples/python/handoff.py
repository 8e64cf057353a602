#!/usr/bin/env python3
"""An agent's side of a handoff, through `lf-handoff serve`, with nothing but
Python's standard library.

It creates a wave (the parent), opens a handoff for it that asks a question
with choices (allow or deny, denying by itself when the deadline passes),
prints the handoff's id on stdout, waits (long polls of 30 s) until a person
answers, then claims its wake as the parent's next body (generation 2) and
prints the outcome, the answer and the claim as JSON.

    LF_HANDOFF_URL=http://127.0.0.1:7381 LF_HANDOFF_TOKEN=lfh_... \\
        python3 examples/python/handoff.py --reason "may I run the migration?"

The token needs the `agent` scope. Meanwhile a person answers in the inbox
(one button per choice), from a notification's link, or with a token of
the `person` scope:

    lf-handoff --store http://127.0.0.1:7381 answer ID --choice allow

`--choices ''` asks no question: the person then finishes with a summary
(`complete ID --summary "logged in"`), and the answer is null.

Every error of the service is a JSON object {"error": {"kind", "category",
"code", "message"}}; this script prints its message and exits with its
`code`, the exit code the command line gives the same error.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
import uuid


class ServiceError(Exception):
    """An error object of the service."""

    def __init__(self, status, error):
        super().__init__(error.get("message", "unknown error"))
        self.status = status
        self.kind = error.get("kind", "unknown")
        self.code = int(error.get("code", 1))


class Registry:
    """The few routes an agent uses."""

    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method, path, body=None, timeout=60):
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as failure:
            try:
                error = json.load(failure)["error"]
            except (ValueError, KeyError, TypeError):
                error = {"message": "HTTP %d without an error object" % failure.code}
            raise ServiceError(failure.code, error) from None

    def create_wave(self, name, repo):
        wave = {
            "id": "wv_" + str(uuid.uuid4()),
            "name": name,
            "repo": repo,
            "status": "active",
            "latest_process": None,
        }
        return self.call("POST", "/v1/waves", wave)

    def open(self, parent, reason, generation, expires_in, choices, on_expiry):
        body = {
            "parent": parent,
            "home": "user@local",
            "cwd": os.getcwd(),
            "provider": "example",
            "provider_session_id": None,
            "body_generation": generation,
            "reason": reason,
            "environment": {},
            "attach_argv": ["tmux", "attach", "-t", "agent"],
            "expires_in": expires_in,
        }
        if choices:
            # Each choice is "value" or {"value", "label"}; the deadline's
            # answer must be one of them.
            body["choices"] = choices
            if on_expiry:
                body["on_expiry"] = on_expiry
        return self.call("POST", "/v1/handoffs", body)["handoff"]

    def wait(self, handoff_id):
        """Long polls until the handoff ends; the handoff."""
        while True:
            answer = self.call(
                "GET", "/v1/handoffs/%s/wait?timeout=30s" % handoff_id, timeout=90
            )
            if answer["ended"]:
                return answer["handoff"]

    def claim_wake(self, handoff_id, generation):
        return self.call(
            "POST",
            "/v1/handoffs/%s/claim-wake" % handoff_id,
            {"generation": generation},
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reason", default="a person is needed to log in")
    parser.add_argument("--expires-in", default="1h")
    parser.add_argument(
        "--choices",
        default="allow,deny",
        help="comma-separated choices a person picks from ('' for none)",
    )
    parser.add_argument(
        "--on-expiry", default="deny", help="the answer the deadline gives"
    )
    args = parser.parse_args()
    url = os.environ.get("LF_HANDOFF_URL", "http://127.0.0.1:7381")
    token = os.environ.get("LF_HANDOFF_TOKEN")
    if not token:
        print("error: set LF_HANDOFF_TOKEN to a token of the agent scope", file=sys.stderr)
        return 2
    registry = Registry(url, token)
    try:
        wave = registry.create_wave("python example", os.getcwd())
        parent = {"kind": "wave", "id": wave["id"]}
        choices = [c for c in args.choices.split(",") if c]
        on_expiry = args.on_expiry if choices else None
        handoff = registry.open(
            parent, args.reason, 1, args.expires_in, choices, on_expiry
        )
        print(handoff["id"], flush=True)
        print("waiting for a person to finish %s" % handoff["id"], file=sys.stderr)
        ended = registry.wait(handoff["id"])
        claim = registry.claim_wake(handoff["id"], 2)
    except ServiceError as error:
        print("error: %s (%s)" % (error, error.kind), file=sys.stderr)
        return error.code
    except OSError as error:
        print("error: cannot reach %s: %s" % (url, error), file=sys.stderr)
        return 5
    print(
        json.dumps(
            {
                "outcome": ended["outcome"],
                "answer": ended.get("answer"),
                "claimed": claim["claimed"],
            }
        )
    )
    return 0 if claim["claimed"] else 4


if __name__ == "__main__":
    sys.exit(main())
