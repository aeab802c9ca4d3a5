"""Fault injection under load (issue 18): a router in front of simulated engines
(`--backend sim`, steps of 25 ms, at most 4 sequences each, so that requests run and queue),
driven by concurrent openai clients (completions and chat, streamed and not, each with a
unique prompt and x-request-id), while an engine is killed (SIGKILL), terminated (SIGTERM,
with --shutdown-timeout), frozen (SIGSTOP, then SIGCONT), replaced by a bad upstream that
scrapes healthy and fails every request one way (BAD_MODES), or held by thousands
of slowloris connections.

What every scenario checks (chaos_load.py says how):
  - every request ends, within a bound, with a full answer or a clean error (an OpenAI error
    body with a 4xx/5xx status, or for a stream an SSE error event, then [DONE]); never a
    connection error, a cut stream, a JSON decode error in the client, or a hang;
  - where the fault allows no loss (SIGTERM, SIGSTOP, slowloris, a bad upstream that fails
    before any byte), every request gets its full answer;
  - no request is served twice: the engines' vllm:request_success_total rose by exactly the
    number of full answers the clients got from them (x-switchyard-endpoint);
  - every surviving engine ends with nothing running or waiting and no KV block held.
The whole file runs in about a minute on two cores (release build)."""
import asyncio
import os
import signal
import time

import pytest
import requests

from chaos_load import (assert_all_ok, assert_clean, assert_kv_back_to_baseline,
                        assert_served_once, client_for, mixed, run_all, successes, summary)
from engine_server import EngineServer
from fault_upstream import FaultUpstream
from router_server import Router, member_name
from slowloris import Slowloris, raise_fd_limit

SIM = ("--backend", "sim", "--sim-latency", "zero,overhead_ms=25", "--max-num-seqs", "4")
BOUND_S = 30         # no request may take longer, whatever the fault
SHUTDOWN_S = 30      # --shutdown-timeout of an engine that is terminated: enough to drain
FREEZE_S = 10        # SIGSTOP .. SIGCONT; the router marks a silent engine down within ~3.3 s
SLOW_CONNECTIONS = 4300  # more than the servers' 4,096 connections before issue 18


@pytest.fixture(autouse=True, scope="module")
def enough_file_descriptors():
    """Before any server starts (they inherit the limit): room for the slowloris sockets."""
    got = raise_fd_limit(SLOW_CONNECTIONS + 4096)
    assert got >= SLOW_CONNECTIONS + 1024, f"open-file limit {got}: too low for slowloris"


def start_engines(*flag_sets):
    engines = [EngineServer(*SIM, *flags) for flags in flag_sets]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    return engines


def stop_all(router, engines):
    errors = []
    for stop in ([router.stop] if router else []) + [e.stop for e in engines]:
        try:
            stop()
        except AssertionError as err:
            errors.append(str(err))
    assert not errors, errors


def names_of(members):
    return {m: member_name(m) for m in members}


async def busy_engine(router, engines, reqs, min_active=8, timeout=30):
    """Waits until the router has at least `min_active` requests on one of `engines` (more
    than its 4 sequences: some run, some wait in its queue) and one of that engine's streams
    has begun; returns that engine (the victim)."""
    names = names_of(engines)
    deadline = time.monotonic() + timeout
    while True:
        eps = {e["name"]: e for e in await asyncio.to_thread(router.endpoints)}
        for engine in engines:
            name = names[engine]
            streaming = any(r.endpoint == name and r.chunks >= 1 and r.kind is None
                            for r in reqs)
            if eps[name]["active_requests"] >= min_active and streaming:
                return engine
        assert time.monotonic() < deadline, (
            f"no engine held {min_active} requests with a stream begun: "
            f"{ {n: e['active_requests'] for n, e in eps.items()} }")
        await asyncio.sleep(0.01)


def wait_router_idle(router, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        eps = router.endpoints()
        if all(e["active_requests"] == 0 for e in eps):
            return
        assert time.monotonic() < deadline, f"the router still counts requests in flight: {eps}"
        time.sleep(0.05)


def print_outcomes(title, reqs):
    print(f"\n{title}: {summary(reqs)}")
    for r in reqs:
        if r.kind != "ok":
            print(f"  {r.what}")


# --------------------------------------------------------------------------- engine signals

def test_kill_9_under_load():
    """SIGKILL of an engine holding running and queued requests: only a stream that had begun
    on it may fail, and only with an SSE error event; every other request is answered by the
    survivors, once each."""
    engines = start_engines((), (), ())
    router = Router(engines)
    try:
        names = names_of(engines)
        assert_kv_back_to_baseline(engines, names)
        before = {names[e]: successes(e) for e in engines}
        reqs = mixed(60, "kill")

        async def go():
            async with client_for(router.url) as client:
                load = asyncio.create_task(run_all(client, reqs, BOUND_S))
                victim = await busy_engine(router, engines, reqs)
                victim.kill()
                await load
                return victim

        victim = asyncio.run(go())
        survivors = [e for e in engines if e is not victim]
        print_outcomes(f"kill -9 {names[victim]}", reqs)
        assert_clean(reqs, "kill -9 of an engine")
        lost = [r.what for r in reqs if r.kind != "ok" and not (
            r.stream and r.endpoint == names[victim] and r.chunks >= 1)]
        assert not lost, ("requests lost to the kill that had not begun streaming from it (they "
                          "must be retried elsewhere):\n  " + "\n  ".join(lost))
        assert_served_once(survivors, before, reqs, names)
        assert_kv_back_to_baseline(survivors, names)
        wait_router_idle(router)
    finally:
        stop_all(router, engines)


def test_sigterm_drains_under_load():
    """SIGTERM of an engine with running and queued requests, with more requests arriving while
    it drains: it reports not-ready on /health, finishes what it holds (or refuses it so that
    the router retries), exits 0, and no request is lost or served twice."""
    engines = start_engines(*[("--shutdown-timeout", SHUTDOWN_S)] * 3)
    router = Router(engines)
    try:
        names = names_of(engines)
        assert_kv_back_to_baseline(engines, names)
        before = {names[e]: successes(e) for e in engines}
        reqs, late = mixed(60, "term"), mixed(24, "term-late")
        health = []
        victim = None

        def health_while_draining():
            """/health of the victim until it stops answering 200 (or answering at all)."""
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    status = requests.get(f"{victim.url}/health", timeout=2).status_code
                except requests.RequestException as err:
                    status = f"no answer ({type(err).__name__})"
                health.append(status)
                if status != 200:
                    return
                time.sleep(0.02)

        async def go():
            nonlocal victim
            async with client_for(router.url) as client:
                load = asyncio.create_task(run_all(client, reqs, BOUND_S))
                victim = await busy_engine(router, engines, reqs)
                victim.terminate()
                probe = asyncio.create_task(asyncio.to_thread(health_while_draining))
                await run_all(client, late, BOUND_S)
                await load
                await probe

        asyncio.run(go())
        survivors = [e for e in engines if e is not victim]
        print_outcomes(f"SIGTERM {names[victim]}", reqs + late)
        victim.stop(timeout=SHUTDOWN_S + 10)  # exit code 0 within the drain
        assert health and health[-1] != 200, (
            f"{names[victim]} kept answering /health 200 while draining: {health[:5]}...")
        assert_all_ok(reqs + late, "SIGTERM must drain: no request may be lost")
        assert_served_once(survivors, before, reqs + late, names)
        assert_kv_back_to_baseline(survivors, names)
        wait_router_idle(router)
    finally:
        stop_all(router, engines)


def test_sigstop_then_sigcont_under_load():
    """SIGSTOP of an engine under load for FREEZE_S, then SIGCONT. Once the router marks it
    down, the requests waiting on it that have had no byte are retried elsewhere: a request
    that is not streamed must not wait for the thaw. Streams it had begun resume after
    SIGCONT. Every request gets its full answer, once."""
    engines = start_engines((), (), ())
    router = Router(engines)
    try:
        names = names_of(engines)
        assert_kv_back_to_baseline(engines, names)
        before = {names[e]: successes(e) for e in engines}
        reqs, late = mixed(60, "stop"), mixed(20, "stop-late")
        times = {}
        victim = None

        async def go():
            nonlocal victim
            async with client_for(router.url) as client:
                load = asyncio.create_task(run_all(client, reqs, BOUND_S))
                victim = await busy_engine(router, engines, reqs)
                os.kill(victim.proc.pid, signal.SIGSTOP)
                times["stop"] = time.monotonic()
                more = asyncio.create_task(run_all(client, late, BOUND_S))
                await asyncio.sleep(FREEZE_S)  # the fault's length, not a wait for an event
                os.kill(victim.proc.pid, signal.SIGCONT)
                times["cont"] = time.monotonic()
                await load
                await more

        try:
            asyncio.run(go())
        finally:
            if victim is not None and victim.proc.poll() is None:
                os.kill(victim.proc.pid, signal.SIGCONT)
        everything = reqs + late
        print_outcomes(f"SIGSTOP {names[victim]} for {FREEZE_S} s", everything)
        assert_all_ok(everything, "a frozen engine that thaws loses nothing")
        waited = [f"{r.what} ended {r.ended - times['stop']:.1f} s after SIGSTOP"
                  for r in everything
                  if not r.stream and r.ended >= times["cont"]]
        assert not waited, (
            f"requests that were not streamed waited for the frozen engine until SIGCONT "
            f"({FREEZE_S} s) instead of being retried elsewhere once it was marked down:\n  "
            + "\n  ".join(waited))
        assert_served_once(engines, before, everything, names)
        assert_kv_back_to_baseline(engines, names)
        wait_router_idle(router)
    finally:
        stop_all(router, engines)


# --------------------------------------------------------------------------- a bad upstream

GARBAGE_REQUESTS = 48
GARBAGE_CONCURRENCY = 8
# The fault_upstream modes put in the pool: each fails every generation request.
BAD_MODES = ("reset", "garbage", "http500", "cut-stream", "json-for-stream", "silence")
# Bounded waits for an upstream that sends a head and then nothing.
PROXY_TIMEOUTS = "proxy: {firstByteTimeoutMs: 3000, idleTimeoutMs: 3000}\n"


@pytest.fixture(scope="module")
def two_engines():
    engines = start_engines((), ())
    try:
        yield engines
    finally:
        stop_all(None, engines)


@pytest.mark.parametrize("mode", BAD_MODES)
def test_bad_upstream_in_the_pool(two_engines, mode):
    """A member that scrapes as an idle vLLM but fails every generation request (`mode`).
    Every request ends with a full answer or a clean error: what failed before a byte reached
    the client is retried or answered with an OpenAI error; a stream cut mid-event ends with
    an error event after the whole events only (never glued to half an event: the openai
    client then raises JSONDecodeError), also when the upstream's body ended whole as HTTP but
    without [DONE]; a 200 application/json answer to a stream request is not passed off as the
    stream (no SSE written into a JSON body). After a few failures the router stops sending
    the member requests (outlier ejection), so it gets at most a third of them: without
    ejection it looks the least loaded and gets nearly every first attempt."""
    garbage = FaultUpstream(mode).start()
    router = None
    try:
        router = Router([*two_engines, garbage], scheduling=PROXY_TIMEOUTS)
        names = names_of(two_engines)
        assert_kv_back_to_baseline(two_engines, names)
        before = {names[e]: successes(e) for e in two_engines}
        reqs = mixed(GARBAGE_REQUESTS, f"bad-{mode}", streams_only=mode == "json-for-stream")

        async def go():
            async with client_for(router.url) as client:
                await run_all(client, reqs, BOUND_S, concurrency=GARBAGE_CONCURRENCY)

        asyncio.run(go())
        print_outcomes(f"bad upstream ({mode}): it got {garbage.hits} requests", reqs)
        assert_clean(reqs, f"a member that fails every request ({mode})")
        garbage_name = member_name(garbage)
        served_by_garbage = [r.what for r in reqs if r.kind == "ok" and r.endpoint not in
                             names.values()]
        assert not served_by_garbage, ("full answers that came from the bad member (it makes "
                                       "none):\n  " + "\n  ".join(served_by_garbage))
        assert garbage.hits <= GARBAGE_REQUESTS // 3, (
            f"the member that fails every request ({mode}) got {garbage.hits} of "
            f"{GARBAGE_REQUESTS} requests: it was never ejected; the router's view: "
            f"{[e for e in router.endpoints() if e['name'] == garbage_name]}")
        assert_served_once(two_engines, before, reqs, names)
        assert_kv_back_to_baseline(two_engines, names)
        wait_router_idle(router)
    finally:
        try:
            if router is not None:
                router.stop()
        finally:
            garbage.stop()


# --------------------------------------------------------------------------- slowloris

SLOWLORIS_BOUND_S = 6  # a normal request during the attack: served, not kept waiting


def slowloris_wave(port, client_urls, n_requests=8):
    """Opens SLOW_CONNECTIONS slowloris connections to `port`, then, while they trickle,
    runs n_requests through each of `client_urls`, each bounded by SLOWLORIS_BOUND_S (well
    under the 10 s header timeout that frees the slow connections' slots); returns the
    requests."""
    reqs = {url: mixed(n_requests, f"loris-{i}") for i, url in enumerate(client_urls)}

    async def go():
        attack = await Slowloris(port, SLOW_CONNECTIONS).open()
        try:
            async def through(url):
                async with client_for(url, timeout=SLOWLORIS_BOUND_S) as client:
                    await run_all(client, reqs[url], SLOWLORIS_BOUND_S)
            await asyncio.gather(*(through(url) for url in client_urls))
        finally:
            held = await attack.close()
        return attack, held

    attack, held = asyncio.run(go())
    print(f"\nslowloris on :{port}: {SLOW_CONNECTIONS} connections, {attack.refused} refused, "
          f"{attack.dropped} answered or closed by the server, {held} still held at the end")
    return [r for rs in reqs.values() for r in rs]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        line = next(line for line in f if line.startswith("VmRSS:"))
    return int(line.split()[1]) // 1024


def test_slowloris_against_the_router():
    """SLOW_CONNECTIONS slowloris connections from one address to the router (more than its
    connection limit had room for): clients from another address are still served at once."""
    engines = start_engines((), ())
    router = Router(engines)
    try:
        names = names_of(engines)
        before = {names[e]: successes(e) for e in engines}
        port = int(router.url.rsplit(":", 1)[1])
        rss_before = rss_mb(router.proc.pid)
        reqs = slowloris_wave(port, [router.url])
        print(f"router RSS {rss_before} MB before the wave, {rss_mb(router.proc.pid)} MB after")
        print_outcomes("through the router during slowloris", reqs)
        assert_all_ok(reqs, f"{SLOW_CONNECTIONS} slow connections from 127.0.0.3 to the router "
                            f"must not keep clients on 127.0.0.1 out")
        assert_served_once(engines, before, reqs, names)
        assert_kv_back_to_baseline(engines, names)
    finally:
        stop_all(router, engines)


def test_slowloris_against_an_engine():
    """The same against an engine: the router's requests to it and clients asking it directly
    are still served at once."""
    engines = start_engines((), ())
    router = Router(engines)
    try:
        names = names_of(engines)
        victim = engines[0]
        before = {names[e]: successes(e) for e in engines}
        reqs = slowloris_wave(victim.port, [router.url, victim.url])
        for r in reqs:
            if r.endpoint is None and r.kind == "ok":
                r.endpoint = names[victim]  # asked of the engine itself
        print_outcomes(f"through the router and straight to {names[victim]} during slowloris",
                       reqs)
        assert_all_ok(reqs, f"{SLOW_CONNECTIONS} slow connections from 127.0.0.3 to an engine "
                            f"must not keep the router and clients on 127.0.0.1 out")
        assert_served_once(engines, before, reqs, names)
        assert_kv_back_to_baseline(engines, names)
    finally:
        stop_all(router, engines)
