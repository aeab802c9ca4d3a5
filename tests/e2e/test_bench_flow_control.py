"""bench/flow_control_bench.py --smoke on tiny-llama3 (every scenario, seconds each), so that
it keeps working: the noisy tenant is refused for its rate with Retry-After and held to its
quota, batch work waits in flow control's queue while interactive requests go, every agent
session finishes every turn, and the gate's windows are all served."""
from conftest import bench_smoke


def test_flow_control_bench_smoke(switchyard, tmp_path):
    output, stdout = bench_smoke("flow_control_bench.py", tmp_path, timeout=150)
    result = output["results"]
    assert set(result) == {"noisy", "urgent", "agents", "gate"}

    [noisy] = result["noisy"]["runs"]
    for phase in ("with_a_on", "with_a_off"):
        a = noisy[phase]
        assert a["a_429"] > 0 and set(a["a_reasons"]) == {"rate-limited-requests"}
        assert a["a_retry_after"] and all(int(s) >= 1 for s in a["a_retry_after"])
        assert a["a_failed"] == 0
    for phase in ("with_a_on", "with_a_off", "a_at_quota_on"):
        # The smoke's quota is 1 req/s with a burst of 1: over its ~3 s window A gets at most
        # the burst plus a request a second.
        assert 0 < noisy[phase]["a_admitted_per_s"] <= 1 + 1 / 2
    assert all(noisy[p]["b_failed"] == 0 and noisy[p]["b_ttft_p99_ms"] > 0
               for p in ("alone", "with_a_on", "with_a_off", "a_at_quota_on"))
    assert result["noisy"]["summary"]["ratio_on"] > 0

    [urgent] = result["urgent"]["runs"]
    on, off = urgent["with_batch_on"], urgent["with_batch_off"]
    # With flow control on, batch work waits in the router; without it, nothing does.
    assert on["batch_queue"]["count"] > 0 and on["interactive_queue"]["count"] > 0
    assert off["batch_queue"]["count"] == 0
    assert on["busy_router"] <= 1.0 < off["busy_router"]
    assert on["batch_done_per_s"] > 0 and off["batch_done_per_s"] > 0
    assert all(urgent[p]["interactive_failed"] == 0 for p in ("alone", "with_batch_on",
                                                              "with_batch_off"))

    [agents] = result["agents"]["runs"]
    assert agents["failed"] == 0
    assert agents["requests"] == 40 * 2  # every session, every turn
    assert agents["queued_requests"] == agents["requests"] + agents["refused_429"]
    assert agents["router_cpu_us_per_request"] > 0 and agents["router_peak_rss_mib"] > 0

    [gate] = result["gate"]["runs"]
    window = gate["20"]
    assert all(window[x]["ok"] == window[x]["requests"] > 0 for x in ("on", "off"))
    # Only the router with flow control has a pump thread, and with nothing queued it sleeps.
    assert window["on"]["pump_thread_ms_per_s"] < 1
    assert window["off"]["pump_thread_ms_per_s"] == 0
    # Every request went through flow control's queue, and none waited there.
    assert window["on"]["queue"]["count"] == window["on"]["requests"]
    assert window["on"]["queue"]["p99_ms"] < 1
    assert window["ratio"] > 0
    for title in ("noisy neighbour:", "urgent vs batch:", "agents:", "cost of the gate at 20"):
        assert title in stdout
