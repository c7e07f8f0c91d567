"""Figure 1 -- bias on a no-op.

    python bench/bench_bias.py [--quick]

For `lambda: None` and the builtin `int`, side by side in one process and in
interleaved rounds:
  * ours: benchmark_callable(f).median_ms (and its overhead_ms, the median of
    a native no-op through the same loop: the harness's own floor);
  * pure: the same protocol in pure Python (bench/pure_python_harness.py);
  * timeit: timeit's amortised per-call time (no clock read per call), the
    closest thing to the callable's true cost.
Target: ours <= 0.55 x pure (median over rounds of the per-round ratio).
"""
import timeit

from _common import (Figure, ensure_importable, fmt_ns, median, print_details, quiet_warnings,
                     run_script)

TARGET = 0.55


def _noop():
    return None


def run(quick=False):
    ensure_importable()
    quiet_warnings()
    from spatialhub.utils.profiling import benchmark_callable
    from pure_python_harness import benchmark_callable_py

    iters = 2_000 if quick else 20_000
    warm = 100 if quick else 500
    rounds = 15 if quick else 31
    funcs = [("lambda: None", lambda: None), ("int", int)]
    rows, figs = [], []
    for label, f in funcs:
        ours, pure, ti, ovh, ratio = [], [], [], [], []
        for r in range(rounds):
            # alternate the order so neither side always runs first
            order = ("ours", "pure") if r % 2 == 0 else ("pure", "ours")
            got = {}
            for who in order:
                if who == "ours":
                    s = benchmark_callable(f, num_warmup=warm, num_iters=iters)
                    got["ours"] = s.median_ms
                    ovh.append(s.overhead_ms)
                else:
                    got["pure"] = benchmark_callable_py(f, num_warmup=warm,
                                                        num_iters=iters)["median_ms"]
            ours.append(got["ours"])
            pure.append(got["pure"])
            ratio.append(got["ours"] / got["pure"])
            ti.append(timeit.Timer(f).timeit(number=iters) / iters * 1e3)
        m_ours, m_pure, m_ti, m_ovh, m_ratio = map(median, (ours, pure, ti, ovh, ratio))
        rows.append((label, fmt_ns(m_ours), fmt_ns(m_pure), fmt_ns(m_ti), fmt_ns(m_ovh),
                     fmt_ns(m_ours - m_ti), fmt_ns(m_pure - m_ti),
                     f"{m_ratio:.2f} ({min(ratio):.2f}-{max(ratio):.2f})"))
        figs.append(Figure("1 bias", f"no-op median, ours / pure-Python (`{label}`)",
                           f"{m_ratio:.2f}", f"<= {TARGET}", m_ratio <= TARGET))
        figs.append(Figure("1 bias", f"`{label}`: ours / pure / timeit / overhead_ms",
                           f"{m_ours * 1e6:.0f} / {m_pure * 1e6:.0f} / {m_ti * 1e6:.0f} / "
                           f"{m_ovh * 1e6:.0f} ns", "-", None))
    print_details(f"1. bias on a no-op ({iters} iterations, median of {rounds} interleaved rounds)",
                  ["callable", "ours median", "pure-Python median", "timeit per call",
                   "ours overhead_ms", "ours - timeit", "pure - timeit",
                   "ours/pure (range)"], rows)
    return figs


if __name__ == "__main__":
    raise SystemExit(run_script(run))
