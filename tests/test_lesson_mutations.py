"""Each mistake a task's text warns about fails that task's VISIBLE test, with a message naming it (issue 33).

A mutation is one text substitution inside a solution region of the instructor's percent source
(modules/19_benchmarking/*_dev.py): the mistake a student would make. The mutated source, with its
hidden tests cut out (what a student's notebook holds), runs in this process, and the task's visible
test must raise an AssertionError whose message names the mistake. The unmutated source passes the
same tests (the control). A few representative mutations go end to end, through `module complete`
in a student kit (test_module_complete_names_the_mistake): the task is reported failed, with the
message, not passed.
"""
from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from tito.workspace.complete import notebook_tasks
from tito.grading import feedback

ROOT = Path(__file__).resolve().parents[1]
M19 = ROOT / "modules" / "19_benchmarking"
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS\n.*?^[ \t]*### END HIDDEN TESTS\n", re.S | re.M)
SOLUTION = re.compile(r"### BEGIN SOLUTION\n.*?### END SOLUTION", re.S)

# (notebook, visible test, mistake: the solution's text -> the wrong text, what the failure must say)
MUTATIONS = [
    # BenchmarkResult: the lesson's opening mistake, and the table's
    ("results_dev", "test_unit_benchmark_result", "median as the mean",
     "self.median = float(np.median(arr))", "self.median = float(arr.mean())", "that is the mean"),
    ("results_dev", "test_unit_benchmark_result", "population std (n, not n-1)",
     "self.std = float(arr.std(ddof=1)) if self.count > 1 else 0.0\n        self.median",
     "self.std = float(arr.std()) if self.count > 1 else 0.0\n        self.median", "population std"),
    ("results_dev", "test_unit_benchmark_result", "z = 1.96 instead of Student's t",
     "float(_stats.t.ppf((1 + self.confidence) / 2, self.count - 1))", "1.959963984540054", "z = 1.96"),
    ("results_dev", "test_unit_benchmark_result", "t with n degrees of freedom, not n - 1",
     "float(_stats.t.ppf((1 + self.confidence) / 2, self.count - 1))", "float(_stats.t.ppf((1 + self.confidence) / 2, self.count))",
     "that is t with n = 5 degrees of freedom"),
    ("results_dev", "test_unit_benchmark_result", "percentiles read off one rank",
     "np.percentile(arr, [50, 90, 95, 99])", "np.percentile(arr, [50, 90, 95, 99], method='lower')",
     "not interpolated"),
    ("results_dev", "test_unit_benchmark_result", "outliers as the values, not a count",
     "int(np.sum((arr < q1 - 1.5 * self.iqr) | (arr > q3 + 1.5 * self.iqr)))",
     "arr[(arr < q1 - 1.5 * self.iqr) | (arr > q3 + 1.5 * self.iqr)].tolist()", "an int"),
    ("results_dev", "test_unit_benchmark_result", "an error that does not start with the argument",
     'raise ValueError(f"values: expected at least one measurement',
     'raise ValueError(f"invalid input: expected at least one measurement',
     "should start with the argument it is about, 'values'"),
    # Wilson
    ("results_dev", "test_unit_wilson_interval", "the Wald interval",
     "half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))",
     "half, center = z * math.sqrt(p * (1 - p) / n), p", "that is the Wald interval"),
    ("results_dev", "test_unit_wilson_interval", "z fixed at 1.96 whatever the confidence",
     "z = float(_stats.norm.ppf((1 + confidence) / 2))", "z = 1.959963984540054", "z does not follow the confidence"),
    ("results_dev", "test_unit_wilson_interval", "an error about 'n' that does not start with n",
     'raise ValueError(f"n: expected a positive', 'raise ValueError(f"invalid sample count: expected a positive',
     "should start with the argument it is about, 'n'"),
    # bootstrap
    ("results_dev", "test_unit_resampler_and_rule", "b's indices drawn before a's",
     "resampled = [a[rng.integers(0, a.size, size=(n_boot, a.size))] for a in arrays]",
     "resampled = [a[rng.integers(0, a.size, size=(n_boot, a.size))] for a in arrays[::-1]][::-1]",
     "a's indices drawn first"),
    ("results_dev", "test_unit_resampler_and_rule", "paired resampled independently",
     "        idx = rng.integers(0, arrays[0].size, size=(n_boot, arrays[0].size))\n"
     "        resampled = [a[idx] for a in arrays]",
     "        resampled = [a[rng.integers(0, a.size, size=(n_boot, a.size))] for a in arrays]",
     "same indices for both samples"),
    # three verdicts (issue 41): the textbook shortcuts of "not significant"
    ("results_dev", "test_unit_comparison_outcome", "absence of evidence read as equivalence",
     'return "equivalent" if within else "inconclusive"', 'return "equivalent"', "not significant is not equivalent"),
    ("results_dev", "test_unit_comparison_outcome", "an interval containing no difference",
     "within = center - min_effect <= lo and hi <= center + min_effect", "within = lo <= center <= hi",
     "the interval contains 1, but also a 10% change"),
    ("results_dev", "test_unit_comparison_outcome", "only the upper end checked",
     "within = center - min_effect <= lo and hi <= center + min_effect", "within = hi <= center + min_effect",
     "both ends must lie within 1 ± 2%"),
    ("results_dev", "test_unit_comparison_outcome", "the band's edges left out",
     "within = center - min_effect <= lo and hi <= center + min_effect",
     "within = center - min_effect < lo and hi < center + min_effect", "within includes the edges"),
    ("results_dev", "test_unit_comparison_outcome", "no interval read as equivalence",
     '    if lo is None or hi is None:\n        return "inconclusive"', '    if lo is None or hi is None:\n        return "equivalent"',
     "no interval: nothing shows the two alike"),
    ("results_dev", "test_unit_comparison_outcome", "the band around 1 for a difference",
     "within = center - min_effect <= lo and hi <= center + min_effect",
     "within = 1 - min_effect <= lo and hi <= 1 + min_effect", "no difference is 0, the band 0 ± 0.02"),
    # compare_samples
    ("results_dev", "test_unit_compare_samples", "ratio of means",
     "ratio = median_b / median_a", "ratio = float(b_arr.mean() / a_arr.mean())", "that is the ratio of means"),
    ("results_dev", "test_unit_compare_samples", "ratio a / b",
     "ratio = median_b / median_a", "ratio = median_a / median_b", "expected median(b) / median(a)"),
    ("results_dev", "test_unit_compare_samples", "bootstrap of the ratio of means",
     "lambda x, y: np.median(y, axis=1) / np.median(x, axis=1)", "lambda x, y: y.mean(axis=1) / x.mean(axis=1)",
     "that is the interval of the ratio of means"),
    ("results_dev", "test_unit_compare_samples", "a 95% interval whatever alpha",
     "[a_arr, b_arr], n_boot=n_boot, seed=seed, confidence=1 - alpha)", "[a_arr, b_arr], n_boot=n_boot, seed=seed)",
     "the level is 1 - alpha"),
    ("results_dev", "test_unit_compare_samples", "a t-test instead of Mann-Whitney U",
     'float(_stats.mannwhitneyu(a_arr, b_arr, alternative="two-sided").pvalue)',
     "float(_stats.ttest_ind(a_arr, b_arr, equal_var=False).pvalue)", "that is a t-test"),
    ("results_dev", "test_unit_compare_samples", "significance without the effect floor",
     "significant = is_significant(p_value, ratio - 1, alpha, min_effect)", "significant = bool(p_value < alpha)",
     "below min_effect"),
    ("results_dev", "test_unit_compare_samples", "an error about 'a' that does not start with a",
     'raise ValueError(f"{arg}: expected at least 2', 'raise ValueError(f"invalid sample {arg}: expected at least 2',
     "should start with the argument it is about, 'a'"),
    # McNemar
    ("results_dev", "test_unit_mcnemar_exact", "the chi-square approximation",
     'float(_stats.binomtest(b_only, n, 0.5, alternative="two-sided").pvalue)',
     "float(_stats.chi2.sf((abs(a_only - b_only) - 1) ** 2 / n, 1))", "that is the chi-square approximation"),
    # top-1
    ("results_dev", "test_unit_eval_data_and_top1", "argmax over the batch",
     "scores.argmax(dim=1) == y.cpu()", "scores.argmax(dim=0)[:len(y)] == y.cpu()[:scores.shape[1]]", "dim=0"),
    # systems thinking: the interval's half-width, the error's subject
    ("systems_thinking_dev", "test_unit_ci_half_width", "z = 1.96 for a 5-sample interval",
     "    t = stats.t.ppf((1 + confidence) / 2, n - 1)\n    return float(", "    t = stats.norm.ppf((1 + confidence) / 2)\n    return float(",
     "that is z = 1.96 instead of Student's t"),
    ("systems_thinking_dev", "test_unit_ci_half_width", "t with n degrees of freedom, not n - 1",
     "    t = stats.t.ppf((1 + confidence) / 2, n - 1)\n", "    t = stats.t.ppf((1 + confidence) / 2, n)\n",
     "that is t with n = 5 degrees of freedom"),
    ("systems_thinking_dev", "test_unit_ci_half_width", "population std in the half-width",
     "return float(t * statistics.stdev(values) / math.sqrt(n))", "return float(t * statistics.pstdev(values) / math.sqrt(n))",
     "that is the population std"),
    ("systems_thinking_dev", "test_unit_samples_to_shrink", "an error about 'n' that does not start with n",
     'raise ValueError(f"n: expected at least 2 samples', 'raise ValueError(f"too few samples: expected at least 2 (n',
     "should start with the argument it is about, 'n'"),
    ("results_dev", "test_unit_eval_data_and_top1", "a labels error without the words a later notebook reads",
     "labels do not match the model's output", "the labels are out of range", "labels do not match"),
    # hardware: the roofline, the achieved rates, the batch that fits, the activation peak, the device fit
    ("hardware_dev", "test_unit_roofline_estimate", "the bound as the sum of the two times",
     'max(compute_ms, memory_ms),\n', "compute_ms + memory_ms,\n", "that is the sum"),
    ("hardware_dev", "test_unit_roofline_estimate", "seconds in the _ms keys",
     "compute_ms = macs / peak * 1e3", "compute_ms = macs / peak", "that is seconds"),
    ("hardware_dev", "test_unit_roofline_estimate", "bytes per MAC as the intensity",
     "intensity = macs / bytes_moved if", "intensity = bytes_moved / macs if", "that is bytes per MAC"),
    ("hardware_dev", "test_unit_roofline_estimate", "the ridge upside down",
     "ridge = peak / bandwidth", "ridge = bandwidth / peak", "that is bandwidth / peak"),
    ("hardware_dev", "test_unit_roofline_estimate", "memory-bound at the ridge",
     '"memory-bound" if intensity < ridge', '"memory-bound" if intensity <= ridge', "strictly below the ridge"),
    ("hardware_dev", "test_unit_roofline_estimate", "a division by zero bytes",
     "intensity = macs / bytes_moved if bytes_moved > 0 else math.inf", "intensity = macs / bytes_moved",
     "infinite intensity"),
    ("hardware_dev", "test_unit_roofline_estimate", "an error that does not start with macs, bytes_moved",
     'raise ValueError("macs, bytes_moved: expected', 'raise ValueError("no work (macs, bytes_moved): expected',
     "should start with the argument it is about, 'macs'"),
    ("hardware_dev", "test_unit_summarize_hardware", "the weights only as the bytes moved",
     'int(layer_df["parameter_bytes"].sum() + layer_df["activation_bytes"].sum())',
     'int(layer_df["parameter_bytes"].sum())', "that is the weights only"),
    ("hardware_dev", "test_unit_summarize_hardware", "milliseconds as seconds",
     "achieved_bw = total_bytes / seconds / 1e9", "achieved_bw = total_bytes / (seconds * 1e3) / 1e9",
     "the latency is in ms"),
    ("hardware_dev", "test_unit_summarize_hardware", "GiB/s for GB/s",
     "achieved_bw = total_bytes / seconds / 1e9", "achieved_bw = total_bytes / seconds / 2**30", "that is GiB/s"),
    ("hardware_dev", "test_unit_summarize_hardware", "attainment upside down",
     'attained = roof["roofline_bound_ms"] / (seconds * 1e3)', 'attained = (seconds * 1e3) / roof["roofline_bound_ms"]',
     "that is measured / bound"),
    ("hardware_dev", "test_unit_summarize_hardware", "no overhead-bound verdict",
     "if attained >= 0.1 else", "if attained >= 0 else", "overhead-bound (roofline says memory-bound)"),
    ("hardware_dev", "test_unit_auto_adjust_batch_size", "a batch at the limit does not fit",
     "bytes_per_feature) > limit:\n        b //= 2", "bytes_per_feature) >= limit:\n        b //= 2",
     "a batch at the limit fits"),
    ("hardware_dev", "test_unit_auto_adjust_batch_size", "stopping at 1 silently",
     "    if one > limit:\n        raise", "    if one > limit and b > 1:\n        raise", "do not stop at 1 silently"),
    ("hardware_dev", "test_unit_auto_adjust_batch_size", "an error that does not start with memory_limit_mb",
     'raise ValueError(f"memory_limit_mb: even', 'raise ValueError(f"too little memory (memory_limit_mb): even',
     "should start with the argument it is about, 'memory_limit_mb'"),
    ("hardware_dev", "test_unit_estimate_peak_activation_bytes", "the model input left out",
     "peak, previous = 0, int(input_bytes)", "peak, previous = 0, 0", "the model input counts"),
    ("hardware_dev", "test_unit_estimate_peak_activation_bytes", "the largest single tensor",
     "peak = max(peak, previous + int(out))", "peak = max(peak, previous, int(out))", "reads 4096 B and writes 4096 B"),
    ("hardware_dev", "test_unit_device_fit", "an MCU's weights counted in its RAM",
     "(weights if dev.weights_in_ram else 0)", "weights", "that counts the weights"),
    ("hardware_dev", "test_unit_device_fit", "activations at the fp32 size",
     "ram_needed = act_fp32 * scale +", "ram_needed = act_fp32 +", "that is the fp32 size"),
    ("hardware_dev", "test_unit_device_fit", "the fp32 peak for every precision",
     "roofline_estimate(macs, moved, dev.peak_macs_per_s[p],", 'roofline_estimate(macs, moved, dev.peak_macs_per_s["fp32"],',
     "that uses the fp32 peak"),
    ("hardware_dev", "test_unit_device_fit", "fits Flash where the weights are loaded into RAM",
     "None if dev.flash_kb is None or dev.weights_in_ram else", "None if dev.flash_kb is None else",
     "weights loaded into RAM"),
    # metrics: bytes of the whole state, budgets, collect_metrics
    ("metrics_dev", "test_unit_model_memory_mb", "parameters only (no buffers)",
     "for t in _state_tensors(model))", "for t in model.parameters())", "buffers count too"),
    ("metrics_dev", "test_unit_model_memory_mb", "numbers, not bytes",
     "t.numel() * t.element_size() for", "t.numel() for", "that counts numbers"),
    ("metrics_dev", "test_unit_model_memory_mb", "MB as 10^6 bytes", "return total / MiB", "return total / 1e6",
     "that is 10^6 bytes"),
    ("metrics_dev", "test_unit_memory_violations", "a model at the budget violates it",
     'decide(memory_mb, "<=", b) == "fail"', "memory_mb >= b", "exactly at the budget fits"),
    ("metrics_dev", "test_unit_memory_violations", "a key with the budget's '.0'",
     'f"violates_{b:g}mb"', 'f"violates_{b}mb"', "without its '.0'"),
    ("metrics_dev", "test_unit_memory_violations", "a bool accepted as a budget",
     "if not _is_number(b) or b <= 0]", "if not isinstance(b, (int, float)) or not math.isfinite(b) or b <= 0]",
     "a bool is an int"),
    ("metrics_dev", "test_unit_memory_violations", "an error that does not start with budgets",
     'raise ValueError(f"budgets: expected positive', 'raise ValueError(f"bad budgets (budgets): expected positive',
     "should start with the argument it is about, 'budgets'"),
    ("metrics_dev", "test_unit_collect_metrics", "calls per second as the throughput",
     "throughput_sps=batch_size / (mean_ms / 1e3)", "throughput_sps=1e3 / mean_ms", "that is calls per second"),
    ("metrics_dev", "test_unit_collect_metrics", "throughput per millisecond",
     "throughput_sps=batch_size / (mean_ms / 1e3)", "throughput_sps=batch_size / mean_ms", "that is per millisecond"),
    ("metrics_dev", "test_unit_collect_metrics", "the memory of the float32 model",
     "mem_result = memory_result(converted)", "mem_result = memory_result(model)", "that is the float32 model's"),
    ("metrics_dev", "test_unit_collect_metrics", "the multiplier left off the latency",
     "mean_ms = result.mean * k", "mean_ms = result.mean", "latency_multiplier 10: expected latency"),
    ("metrics_dev", "test_unit_collect_metrics", "a host energy reading for a scaled latency",
     "    if k == 1:\n        a = adapt", "    if True:\n        a = adapt", "latency_multiplier 10, power_watts"),
    ("metrics_dev", "test_unit_collect_metrics", "the energy estimate from the unscaled latency",
     "energy_j = mean_ms / 1e3 * power_watts", "energy_j = result.mean / 1e3 * power_watts",
     "the estimate uses the scaled latency"),
    # optimize: sparsity, int8 pruning and the order ablation
    ("optimize_dev", "test_unit_sparsity", "the mean of the per-layer fractions",
     "zeros += int((w == 0).sum())\n            total += w.numel()",
     "zeros += int((w == 0).sum()) / w.numel()\n            total += 1", "the mean of the per-layer fractions"),
    ("optimize_dev", "test_unit_sparsity", "biases counted",
     "        if isinstance(m, _PRUNABLE):\n            w = m.weight.detach()",
     "        for w in [t.detach() for t in m.parameters(recurse=False)] if isinstance(m, _PRUNABLE) else []:\n"
     "            w = w", "biases are not counted"),
    ("optimize_dev", "test_unit_sparsity", "an error that does not start with model",
     'raise ValueError("model: expected at least one nn.Linear or nn.Conv layer to measure',
     'raise ValueError("no layers: expected a model with at least one nn.Linear or nn.Conv layer to measure',
     "should start with the argument it is about, 'model'"),
    ("optimize_dev", "test_unit_ablation", "each int8 layer pruned on its own",
     'prune.global_unstructured([(s, "weight") for s in stand_ins], pruning_method=prune.L1Unstructured, amount=amount)',
     '[prune.l1_unstructured(s, "weight", amount) for s in stand_ins]', "that is pruning each layer on its own"),
    ("optimize_dev", "test_unit_ablation", "pruned weights requantized on a new scale",
     "m.set_weight_bias(_quantize_like(s.weight.detach(), m.weight()), m.bias())",
     "m.set_weight_bias(torch.quantize_per_tensor(s.weight.detach(), float(s.weight.abs().max()) / 127, 0, "
     "torch.qint8), m.bias())", "a kept weight must keep its integer"),
    ("optimize_dev", "test_unit_ablation", "the comparison the wrong way round",
     "compare_results(r[first], r[second], names=ABLATION_ORDERS,", "compare_results(r[second], r[first], names=ABLATION_ORDERS,",
     "expected compare_results(prune->int8, int8->prune)"),
    # olympics: constraints decided on intervals, ranks with ties
    ("olympics_dev", "test_unit_check_constraints", "the point value decides, not the interval",
     "d = decide(value if interval is None else tuple(interval), op, threshold)", "d = decide(value, op, threshold)",
     "straddles it"),
    ("olympics_dev", "test_unit_check_constraints", "'at least' read as 'more than'",
     "tuple(interval), op, threshold)", 'tuple(interval), ">" if op == ">=" else op, threshold)',
     "accuracy exactly 0.85 meets '>= 0.85'"),
    ("olympics_dev", "test_unit_check_constraints", "an inconclusive constraint counted as met",
     'passed=d == "pass"', 'passed=d != "fail"', "expected ('inconclusive', False)"),
    ("olympics_dev", "test_unit_check_constraints", "no reason for an unmeasured quantity",
     ', reason=f"{quantity} was not measured")', ")", "should say why in 'reason'"),
    ("olympics_dev", "test_unit_rank_with_ties", "certainly better read off the lower end",
     "for _, hi_i in intervals]", "for hi_i, _ in intervals]", "(0, 10) overlaps both"),
    ("olympics_dev", "test_unit_rank_with_ties", "an identical score counted as better",
     'decide(iv, ">", hi_i)', 'decide(iv, ">=", hi_i)', "never certainly better than itself"),
    ("olympics_dev", "test_unit_rank_with_ties", "ranks from 0",
     "return [1 + sum(", "return [sum(", "ranks start at 1"),
    ("olympics_dev", "test_unit_rank_with_ties", "the ranks sorted",
     'return [1 + sum(decide(iv, ">", hi_i) == "pass" for iv in intervals) for _, hi_i in intervals]',
     'return sorted(1 + sum(decide(iv, ">", hi_i) == "pass" for iv in intervals) for _, hi_i in intervals)',
     "in the order given, not sorted"),
    # energy: RAPL zones, the wrapping counter, the idle baseline
    ("energy_dev", "test_unit_rapl_zones", "psys counted with the packages",
     'self.zones = packages or [z for z in zones if z.name != "psys"]', "self.zones = zones", "psys (the whole platform)"),
    ("energy_dev", "test_unit_rapl_zones", "an unreadable counter raises",
     "            except (OSError, ValueError) as e:\n                self.unavailable_reason = f\"RAPL counter {d} could",
     "            except OSError as e:\n                self.unavailable_reason = f\"RAPL counter {d} could",
     "not an error"),
    ("energy_dev", "test_unit_rapl_zones", "a reason that does not name the zone",
     'f"RAPL counter {d} could not be read', 'f"a RAPL counter could not be read', "a reason naming 'intel-rapl:0'"),
    ("energy_dev", "test_unit_counter_energy", "no wrap-around",
     "    if after >= before:\n        return after - before\n", "    return after - before\n", "no wrap-around"),
    ("energy_dev", "test_unit_counter_energy", "a wrap at the register width",
     "return max_range_uj - before + after", "return 2**32 - before + after", "not at a register width"),
    ("energy_dev", "test_unit_counter_energy", "no idle baseline subtracted",
     "net.append((energy - idle_power * (end - start)) / calls)", "net.append(energy / calls)",
     "idle baseline not subtracted"),
    ("energy_dev", "test_unit_counter_energy", "the idle window's length for every window",
     "net.append((energy - idle_power * (end - start)) / calls)", "net.append((energy - idle_power * (t1 - t0)) / calls)",
     "too much taken off"),
    ("energy_dev", "test_unit_counter_energy", "the gross figure with the idle energy taken off",
     "gross.append(energy / calls)", "gross.append((energy - idle_power * (end - start)) / calls)",
     "gross is a window's joules per call before"),
    # tinymlperf: the compliance decision, the throughput-derived latency
    ("tinymlperf_dev", "test_unit_compliance_decision", "the point estimate against the target",
     'str(decide(quality, ">=", target))', '("pass" if quality.mean >= target else "fail")',
     "comparing the point estimate alone"),
    ("tinymlperf_dev", "test_unit_compliance_decision", "no measurement as a fail",
     '"not evaluated" if quality is None else', '"fail" if quality is None else', "treating no measurement as a fail"),
    ("tinymlperf_dev", "test_unit_compliance_decision", "the target exactly reached is not met",
     'decide(quality, ">=", target)', 'decide(quality, ">", target)', "reaching the target meets it"),
    ("tinymlperf_dev", "test_unit_compliance_decision", "a median exactly at the budget fails",
     'decide(latency_median_ms, "<=", latency_budget_ms)', 'decide(latency_median_ms, "<", latency_budget_ms)',
     "exactly at the budget is within it"),
    ("tinymlperf_dev", "test_unit_compliance_decision", "the quality settled before the budget",
     "    if latency_budget_ms is not None and decide(", '    if quality is None:\n        return "not evaluated"\n'
     "    if latency_budget_ms is not None and decide(", "fails, whatever the quality"),
    ("tinymlperf_dev", "test_unit_latency", "1 / a window's median call as its throughput",
     "1e9 / float(np.mean(s.per_call_ns))", "1e9 / float(np.median(s.per_call_ns))", "not 1 / its median call"),
    ("tinymlperf_dev", "test_unit_latency", "the mean throughput",
     "median_tp = statistics.median(throughput)", "median_tp = statistics.fmean(throughput)",
     "that is 1 / the mean throughput"),
    ("tinymlperf_dev", "test_unit_latency", "the median window latency",
     '"latency_from_throughput_ms": 1000.0 / median_tp', '"latency_from_throughput_ms": statistics.median(1e3 / t for t in throughput)',
     "that is the median window latency"),
    ("tinymlperf_dev", "test_unit_latency", "seconds in the _ms key",
     '"latency_from_throughput_ms": 1000.0 / median_tp', '"latency_from_throughput_ms": 1.0 / median_tp', "that is seconds"),
    ("tinymlperf_dev", "test_unit_latency", "the distribution from the windows",
     'BenchmarkResult("single_stream_latency", single.per_call_ms,',
     'BenchmarkResult("single_stream_latency", [v for s in runs for v in s.per_call_ms],', "comes from the single-stream run"),
    ("tinymlperf_dev", "test_unit_latency", "the single stream without its overhead bound",
     "samples=num_runs, max_overhead_fraction=0.02, sync", "samples=num_runs, sync", "max_overhead_fraction"),
    # benchmarking: the accuracy loop
    ("benchmarking_dev", "test_unit_benchmark_accuracy", "one broken model stops the rest",
     'self._fail("accuracy", name, e)\n                continue', 'self._fail("accuracy", name, e)\n                break',
     "the try belongs inside the loop"),
    ("benchmarking_dev", "test_unit_benchmark_accuracy", "a failure not recorded",
     'self._fail("accuracy", name, e)\n                continue', "continue", "the broken model's error in failures"),
    ("benchmarking_dev", "test_unit_benchmark_accuracy", "only the first dataset", "for d in labelled:",
     "for d in labelled[:1]:", "only the first dataset was counted"),
]


def _source(notebook: str, old: str | None = None, new: str | None = None) -> str:
    "The notebook's percent source, `old` replaced by `new` (once, inside a solution region), hidden tests cut."
    src = (M19 / f"{notebook}.py").read_text(encoding="utf-8")
    if old is not None:
        assert src.count(old) == 1, f"{notebook}: the mutation's text occurs {src.count(old)} times: {old!r}"
        i = src.index(old)
        assert any(m.start() <= i < m.end() for m in SOLUTION.finditer(src)), \
            f"{notebook}: {old!r} is not inside a solution region: a student would not write it"
        src = src.replace(old, new)
    return HIDDEN.sub("", src)


def _run_visible(notebook: str, test: str, src: str) -> None:
    "Run `src` as a module of its own (dataclasses look their module up), then its visible test `test`."
    mod = types.ModuleType(f"mutant_{notebook}")
    sys.modules[mod.__name__] = mod
    try:
        exec(compile(src, str(M19 / f"{notebook}.py"), "exec"), mod.__dict__)
        getattr(mod, test)()
    finally:
        del sys.modules[mod.__name__]


@pytest.mark.parametrize("notebook, test", sorted({(m[0], m[1]) for m in MUTATIONS}))
def test_the_instructors_solution_passes_the_visible_test(notebook, test):
    "The control: without a mutation, each visible test of the table passes."
    _run_visible(notebook, test, _source(notebook))


@pytest.mark.parametrize("notebook, test, mistake, old, new, says", MUTATIONS, ids=[m[2] for m in MUTATIONS])
def test_each_warned_mistake_fails_the_visible_test_by_name(notebook, test, mistake, old, new, says):
    src = _source(notebook, old, new)
    with pytest.raises(AssertionError) as e:
        _run_visible(notebook, test, src)
    assert says in str(e.value), f"{mistake}: the visible test should say {says!r}, got: {e.value}"


def test_module_complete_counts_the_points_grading_counts(course):
    """The points `module complete` shows (its tasks) are those the judge grades (tito.grading.feedback's
    test_points), notebook by notebook; 226 autograded points in all for Module 19 (222 until issue 41 added the three verdicts)."""
    total = 0.0
    for nb_path in course.notebooks("19_benchmarking"):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        shown = {t.grade_id: t.points for t in notebook_tasks(nb)}
        assert shown == {k: float(v) for k, v in feedback.test_points(nb).items()}, nb_path.name
        total += sum(shown.values())
    assert total == 226, total


# ---- end to end: a kit, its results notebook with two mistakes, one `module complete` ------------------------------

# one mistake of MUTATIONS end to end (each is named in the judge above; "median as the mean" and "ratio of means"
# ran here too and proved the same path again, 60-100 s each), and the one only an export can show: in two tasks of
# one notebook, so that one `module complete` reports both, each by its own task's line
E2E = [m for m in MUTATIONS if m[2] == "the Wald interval"] + [
    # passes in the notebook (its unexported test-helper cell imports statistics), but the export lacks the
    # import: the notebook that wrote it is charged, not the later ones that import its module
    ("results_dev", "test_unit_benchmark_result", "statistics imported only in an unexported cell",
     "self.std = float(arr.std(ddof=1)) if self.count > 1 else 0.0\n        self.median",
     "self.std = statistics.stdev(self.values) if self.count > 1 else 0.0\n        self.median",
     "name 'statistics' is not defined")]
GRADE_IDS = {"test_unit_benchmark_result": "test-benchmark-result", "test_unit_compare_samples":
             "test-benchmarking-compare", "test_unit_wilson_interval": "test-benchmarking-wilson"}


@pytest.fixture(scope="module")
def started_kit(course, tmp_path_factory):
    "A student kit, started (`module start 19`): a student working on notebook 1, the others still stubs."
    from shared_fixtures import kit_copy
    from test_student_kit import _tito

    kit = kit_copy(course, "19_benchmarking", tmp_path_factory, tmp_path_factory.mktemp("kit") / "kit").dest
    p = _tito(kit, kit, "module", "start", "19", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return kit, kit / "19_benchmarking"


def _mutated_notebook(course, mutations: list[tuple[str, str]]) -> dict:
    "The instructor's results notebook, each (old, new) of `mutations` replaced in the one solution cell holding it."
    (path,) = [p for p in course.notebooks("19_benchmarking") if p.stem == "results_dev"]
    nb = json.loads(path.read_text(encoding="utf-8"))
    for old, new in mutations:
        hits = 0
        for c in nb["cells"]:
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            if old in src and "### BEGIN SOLUTION" in src:
                c["source"], hits = src.replace(old, new), hits + 1
        assert hits == 1, f"{old!r} found in {hits} solution cells"
    return nb


def test_module_complete_names_each_mistake(course, started_kit):
    """In a kit holding the instructor's results notebook with two mistakes in two tasks, `module complete` reports
    each of those tasks FAILED with the message naming its mistake, and the other tasks of the notebook passed."""
    from test_student_kit import _tito

    kit, mod_dir = started_kit
    assert len({m[1] for m in E2E}) == len(E2E), "one mistake per task: each task's line names its own"
    nb = _mutated_notebook(course, [(old, new) for _, _, _, old, new, _ in E2E])
    (mod_dir / "results_dev.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    # no integration test file matches: the inline tests are what this checks
    out = _tito(kit, mod_dir, "module", "complete", "19", "--tests", "test_19_none.py", timeout=900).stdout
    for notebook, test, mistake, old, new, says in E2E:
        (line,) = [ln for ln in out.splitlines() if f"] {GRADE_IDS[test]}:" in ln]
        assert "[FAIL]" in line and "failed" in line and says in line, f"{mistake}: {line}\n{out[-3000:]}"
    tasks = [ln for ln in out.splitlines() if re.match(r"\s+\[(ok|FAIL|todo|wait)", ln)][:12]  # results_dev's
    # the rest of the notebook still passes: at least 9 of its 12 tasks with one mistake, 8 with the second
    assert sum("[ok  ]" in ln for ln in tasks) >= 9 - (len(E2E) - 1), "\n".join(tasks)
