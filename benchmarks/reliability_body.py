"""Memory of the HTTP proxy and the ingress under a large chunked POST: with no Content-Length,
the body limit must be enforced while the body is read, or one request makes both processes hold it.

Starts the service (tiny stand-in model, default limits: `compiler.max_ir_bytes` 4 MiB, a body limit of
8.06 MiB), samples the resident memory of Ray Serve's HTTP proxy and of the ingress replica every 50 ms, and
sends `--requests` POSTs to /v1/optimize of `--megabytes` each, chunked (a JSON string that never ends),
one after the other, over a raw socket that stops sending once the answer arrives. Each row: the answer's
status and when it came, the bytes the client sent by then, and RSS before, at the peak and 3 s after.
Results go to runs/reliability_body/LABEL.json; the section of docs/bench/reliability.md shows every label
there (`--label before` on the code before the fix, `--label after` on the fix).

    nice -n 10 python benchmarks/reliability_body.py --label after
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import tempfile
import threading
import time
from pathlib import Path

from optserve.testing.reliability_report import REPO, machine, utc_now, write_section

RUNS = REPO / "runs" / "reliability_body"
CHUNK = b"a" * (1 << 20)


def _rss_mb(pid: int) -> float:
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return float("nan")


def _titled(title: str) -> list[int]:
    import psutil

    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if title in " ".join(process.cmdline()):
                found.append(process.pid)
        except psutil.Error:
            pass
    return found


class Sampler(threading.Thread):
    """The peak RSS of each pid, sampled every 50 ms until stopped."""

    def __init__(self, pids: dict[str, int]):
        super().__init__(daemon=True)
        self.pids = pids
        self.peak = {name: _rss_mb(pid) for name, pid in pids.items()}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            for name, pid in self.pids.items():
                self.peak[name] = max(self.peak[name], _rss_mb(pid))


def chunked_post(port: int, megabytes: int, token: str | None) -> dict:
    """POST /v1/optimize with a chunked body of `megabytes` MiB; stop sending once an answer arrives."""
    started = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    head = (
        "POST /v1/optimize HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        "transfer-encoding: chunked\r\n" + (f"authorization: Bearer {token}\r\n" if token else "") + "\r\n"
    )
    sock.sendall(head.encode() + b'8\r\n{"ir": "\r\n')
    sent = 0
    answer = b""
    try:
        for _ in range(megabytes):
            if select.select([sock], [], [], 0)[0]:
                break
            sock.sendall(b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n")
            sent += len(CHUNK)
        else:
            sock.sendall(b'2\r\n"}\r\n0\r\n\r\n')
    except OSError:  # the server closed the connection after answering
        pass
    try:
        while b"\r\n\r\n" not in answer:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    except OSError:
        pass
    sock.close()
    status_line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    return {
        "status": status_line.split(" ")[1] if " " in status_line else "none",
        "answer_s": round(time.monotonic() - started, 2),
        "sent_mb": round(sent / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--label", required=True, help="e.g. before / after (the fix)")
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--requests", type=int, default=2)
    parser.add_argument("--http-port", type=int, default=28000)
    parser.add_argument("--grpc-port", type=int, default=29000)
    parser.add_argument("--no-report", action="store_true", help="print only; leave the report alone")
    args = parser.parse_args()

    from optserve.config import Settings
    from optserve.serve import server
    from optserve.serve.app import APP_NAME
    from optserve.testing.service import build_tiny_model

    model_dir = build_tiny_model(Path(tempfile.mkdtemp(prefix="tiny-model-")))
    settings = Settings.model_validate(
        {
            "compiler": {"workers": 1},
            "engine": {"model_dir": str(model_dir), "backend": "torch"},
            "serve": {"http_port": args.http_port, "grpc_port": args.grpc_port, "ray_num_cpus": 4},
        }
    )
    server.start(settings)
    try:
        (ingress,) = _titled(f"ServeReplica:{APP_NAME}:Ingress")
        proxy = _titled("ProxyActor")[0]
        pids = {"proxy": proxy, "ingress": ingress}
        time.sleep(3)
        rows = []
        for _ in range(args.requests):
            before = {name: _rss_mb(pid) for name, pid in pids.items()}
            sampler = Sampler(pids)
            sampler.start()
            answer = chunked_post(args.http_port, args.megabytes, None)
            time.sleep(3)
            sampler.done.set()
            sampler.join()
            after = {name: _rss_mb(pid) for name, pid in pids.items()}
            row = answer | {
                f"{name}_{when}_mb": round(values[name], 0)
                for name in pids
                for when, values in (("before", before), ("peak", sampler.peak), ("after", after))
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        server.stop()
    RUNS.mkdir(parents=True, exist_ok=True)
    result = {"label": args.label, "date": utc_now(), "machine": machine(), "megabytes": args.megabytes}
    (RUNS / f"{args.label}.json").write_text(json.dumps(result | {"rows": rows}, indent=1))
    if not args.no_report:
        write_section("body", _section())


def _section() -> str:
    lines = [
        "## A chunked body over the limit: memory of the HTTP proxy and the ingress (issue 38)",
        "",
        "- command: `nice -n 10 python benchmarks/reliability_body.py --label LABEL` (service with the",
        "  default limits: body limit 8.06 MiB; tiny stand-in model; one chunked POST of 300 MiB to",
        "  /v1/optimize at a time, over a raw socket that stops sending when the answer comes)",
        "- `before`: the 413 checked only Content-Length (commit 31fec03); `ingress-only`: the",
        "  ingress counts the body's bytes as it reads them and answers 413 past the limit",
        "  (serve/edges/http_app.py `_LimitBodySize`), the proxy still reads ahead of it; `after`: that,",
        "  and the proxy stops reading a body while it holds more than 4 MiB of it that the ingress has not",
        "  taken (serve/edges/http_edge.py)",
        '- "MiB sent by then": what the client wrote before it saw the answer (the proxy\'s queue and both',
        "  kernels' loopback socket buffers); RSS does not shrink back (the allocators keep freed memory)",
        "",
        "| label | date | answer | answered after (s) | MiB sent by then"
        " | proxy RSS before / peak / after (MiB) | ingress RSS before / peak / after (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    order = {"before": 0, "ingress-only": 1, "after": 2}
    results = [json.loads(path.read_text()) for path in RUNS.glob("*.json")]
    for result in sorted(results, key=lambda r: (order.get(r["label"], len(order)), r["label"])):
        for row in result["rows"]:
            proxy = " / ".join(f"{row[f'proxy_{w}_mb']:.0f}" for w in ("before", "peak", "after"))
            ingress = " / ".join(f"{row[f'ingress_{w}_mb']:.0f}" for w in ("before", "peak", "after"))
            lines.append(
                f"| {result['label']} | {result['date']} | {row['status']} | {row['answer_s']} | "
                f"{row['sent_mb']} | {proxy} | {ingress} |"
            )
    lines.append("")
    lines.append(f"Machine: {machine()} (shared with other jobs).")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
