"""`opcode.run` round trip of a 1-step workflow over /mcp from the official
Python SDK: p50 and p99 (a benchmark, not part of the test command).

Usage: python bench_run.py PATH_TO_OPCODE [RUNS]
Build the daemon with `cargo build --release -p opcode-daemon --bin opcode`
and pass target/release/opcode; results go in benches/README.md.
"""

import asyncio
import statistics
import sys
import tempfile
import time

from mcp import Client

from daemon import Daemon, free_port


async def main(binary, runs):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        try:
            async with Client(f"{daemon.url}/mcp") as client:
                await client.call_tool("opcode.define", {"name": "one", "definition": {"steps": [
                    {"id": "s", "action": "workflow.emit", "params": {"event_type": "tick"}}]}})
                for _ in range(runs // 10):
                    await client.call_tool("opcode.run", {"template_name": "one", "agent_id": "bench"})
                times = []
                for _ in range(runs):
                    started = time.perf_counter()
                    result = await client.call_tool("opcode.run", {"template_name": "one", "agent_id": "bench"})
                    times.append(time.perf_counter() - started)
                    assert result.structured_content["status"] == "completed"
            times.sort()
            p50 = times[len(times) // 2] * 1000
            p99 = times[min(len(times) - 1, round(len(times) * 0.99))] * 1000
            print(f"NORMAL opcode.run 1 step over /mcp (Python SDK mcp.Client, {runs} runs)  "
                  f"p50 {p50:.3f} ms  p99 {p99:.3f} ms  mean {statistics.mean(times) * 1000:.3f} ms")
        finally:
            daemon.terminate()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000))
