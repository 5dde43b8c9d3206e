"""Inspection: LLVM IR and assembly of kernels, the vectorisation report, explain()."""

from __future__ import annotations

import numpy as np
import pytest

import numfuse
from numfuse import inspection
from numfuse.graph import ELEMENTWISE, INPUT, NUMPY, Graph, Node
from numfuse.partition import Reason, partition


def logp_and_grad(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


@pytest.fixture(scope="module")
def seed():
    return numfuse.compile(logp_and_grad, np.ones(1000), 0.25)


# ------------------------------------------------------------------ LLVM IR and assembly


def test_llvm_ir_holds_the_kernel_function_and_its_arithmetic(seed):
    kernel = seed.kernels[0]
    ir = kernel.llvm_ir()
    assert kernel.name in kernel.symbol()
    body = "\n".join(inspection.function_body(ir, kernel.symbol()))
    assert body, "the kernel's function is not defined in its IR"
    assert "fsub" in body      # d = x - mu
    assert "fmul" in body      # d**2 and the division by 2 (as a multiplication by 0.5)
    assert "fneg" in body      # -d


def test_asm_is_the_kernels_machine_code(seed):
    kernel = seed.kernels[0]
    text = kernel.asm()
    assert kernel.symbol() in text
    assert "sub" in text and "mul" in text  # vsubpd/vmulpd or their scalar forms


def test_function_only_gives_the_kernels_loop_function_alone(seed):
    kernel = seed.kernels[0]
    module, loop = kernel.llvm_ir(), kernel.llvm_ir(function_only=True)
    assert loop.startswith("define ") and f"@{kernel.symbol()}(" in loop.splitlines()[0]
    assert loop.rstrip().endswith("}") and loop.count("define ") == 1
    assert loop in module and len(loop) < len(module) / 2
    assert "declare" not in loop and "fsub" in loop
    assert loop.splitlines()[1:-1] == inspection.function_body(module, kernel.symbol())
    asm = kernel.asm(function_only=True)
    assert asm.startswith(f"{kernel.symbol()}:") and asm in kernel.asm()
    assert "sub" in asm and ".Lfunc_end" not in asm


def test_function_extraction_from_text():
    from numfuse.kernel import asm_function, ir_function

    ir = "@g = global i8 0\ndefine void @k.row(ptr %a) {\nentry:\n  ret void\n}\n" \
         "define void @k(ptr %a) {\n  ret void\n}\n"
    assert ir_function(ir, "k.row") == "define void @k.row(ptr %a) {\nentry:\n  ret void\n}\n"
    assert ir_function(ir, "k") == "define void @k(ptr %a) {\n  ret void\n}\n"
    assert ir_function(ir, "missing") == ""
    asm = "\t.text\nk.row:\n\tretq\n.Lfunc_end0:\n\t.size k.row\nk:\n\tretq\n"
    assert asm_function(asm, "k.row") == "k.row:\n\tretq\n"
    assert asm_function(asm, "missing") == ""


# ------------------------------------------------------------------ vectorisation report


def test_pure_arithmetic_is_vectorised():
    compiled = numfuse.compile(lambda x, y: x * y + 1.0, np.ones(8), np.ones(8))
    report = inspection.kernel_vector_report(compiled.kernels[0])
    assert report.vectorised
    assert report.width >= 2 and report.element == "double"
    assert report.scalar_calls == ()
    assert report.summary().startswith("vectorised")


def test_a_libm_call_blocks_vectorisation():
    # fmod has no vectorisable version in numfuse.vector_math: it stays a scalar libm call
    compiled = numfuse.compile(lambda x: np.fmod(x, 0.7), np.ones(8))
    report = inspection.kernel_vector_report(compiled.kernels[0])
    assert not report.vectorised
    assert report.scalar_calls == ("fmod",)
    assert "not vectorised" in report.summary() and "fmod" in report.summary()
    assert "fmod" in str(compiled.explain())


def _function(body: str) -> str:
    return "define void @k(ptr %a) {\nentry:\n" + body + "\n}\ndefine void @other() {\n}\n"


def test_vector_report_reads_widths_and_calls_from_ir():
    vector = _function("  %1 = fsub <4 x double> %x, %y\n  %2 = icmp <8 x i1> %p, %q")
    assert inspection.vector_report(vector, "k") == inspection.VectorReport("", 4, "double", ())
    scalar = _function("  %1 = tail call double @log1p(double %x)")
    report = inspection.vector_report(scalar, "k")
    assert (report.width, report.scalar_calls, report.vectorised) == (1, ("log1p",), False)
    # sqrt's scalar call is the cold path of a vector sqrt: not a blocker
    sqrt = _function("  %1 = call <8 x double> @llvm.sqrt.v8f64(<8 x double> %x)\n"
                     "  %2 = tail call double @sqrt(double %y)")
    assert inspection.vector_report(sqrt, "k").vectorised
    # a vector math library call (glibc libmvec) is vectorised code
    libmvec = _function("  %1 = call <4 x double> @_ZGVdN4v_exp(<4 x double> %x)")
    assert inspection.vector_report(libmvec, "k").vectorised
    # only the named function is read
    assert inspection.vector_report(_function(""), "other").width == 1


def test_vector_report_reads_the_loops_only():
    """A scalar call before the loop (a kernel's prelude) does not block it; lanes of
    equal width name the float element."""
    looped = _function("  %0 = tail call double @sqrt(double %s)\n  br label %body\n"
                       "body:\n  %1 = fmul <4 x double> %x, %y\n"
                       "  %2 = add <4 x i64> %i, %j\n"
                       "  br i1 %c, label %body, label %done\n"
                       "done:\n  ret void")
    report = inspection.vector_report(looped, "k")
    assert (report.width, report.element, report.scalar_calls) == (4, "double", ())
    inside = looped.replace("%2 = add <4 x i64> %i, %j",
                            "%2 = tail call double @atan(double %z)")
    assert inspection.vector_report(inside, "k").scalar_calls == ("atan",)


def test_a_kernel_whose_prelude_calls_libm_is_reported_vectorised():
    def logpdf(x, mu, sigma):  # log(sigma), once per row, before the loop
        return np.sum(-0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma))

    compiled = numfuse.compile(logpdf, np.ones(64), 0.5, 2.0)
    report = inspection.kernel_vector_report(compiled.kernels[0])
    assert report.vectorised and report.element == "double", report.summary()


# ------------------------------------------------------------------ explain()


def test_explain_lists_regions_outputs_and_bytes_avoided(seed):
    x = np.ones(1000)
    explanation = seed.explain(x, 0.25)
    assert len(explanation.regions) == 1
    region = explanation.regions[0]
    assert region.layout == "(n),()->(n),(n)"
    assert [text.split(" = ")[1] for text in region.equations] == [
        "subtract a b", "square c", "negative d", "true_divide e 2", "negative c"]
    assert region.outputs == (("g", ("returned",)), ("h", ("returned",)))
    assert explanation.temporaries == ("c", "d", "e")
    assert explanation.bytes_avoided == 3 * 1000 * 8
    assert explanation.bytes_per_element == 24
    assert explanation.boundaries == ()
    assert region.vector is not None and region.vector.vectorised
    text = str(explanation)
    assert "5 numpy elementwise loop(s) -> 1 fused kernel(s)" in text
    assert "23.4 KiB avoided" in text


def test_jitted_explain_uses_the_call_arguments():
    jitted = numfuse.jit(logp_and_grad)
    explanation = jitted.explain(np.ones((10, 20)), 0.25, vectorisation=False)
    assert explanation.bytes_avoided == 3 * 200 * 8
    assert explanation.regions[0].vector is None


def test_explain_counts_temporaries_sized_by_a_numpy_calls_result():
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))  # f64[n,1] against f64[n,n]
        return e / e.sum(axis=1, keepdims=True)

    x = np.ones((30, 7))
    explanation = numfuse.compile(softmax, x).explain(x, vectorisation=False)
    assert explanation.temporaries == ("c",)
    assert explanation.bytes_avoided == 30 * 7 * 8


def _explained(fn, *args):
    plan = partition(numfuse.trace(fn, *args))
    return inspection.explain(plan.graph, plan.regions, None, "fn", "", args)


def test_explain_says_costly_smaller_work_is_not_recomputed():
    def fn(x, y):  # too costly to recompute inside the larger loop
        return np.sin(x) + np.cos(y)

    explanation = _explained(fn, np.ones(4), np.ones((4, 1)))
    assert explanation.reasons == {Reason.NOT_RECOMPUTED}
    assert [boundary.value for boundary in explanation.boundaries] == ["c:f64[n]", "d:f64[n,1]"]
    assert all("20 operations per element" in boundary.detail
               for boundary in explanation.boundaries)
    outputs = {name: why for region in explanation.regions for name, why in region.outputs}
    assert any(why[0].startswith("read by region") for why in outputs.values())


def test_explain_names_the_operand_cap():
    def total(*values):
        result = values[0]
        for value in values[1:]:
            result = result + value
        return result

    explanation = _explained(total, *[np.ones(3) for _ in range(70)])
    assert len(explanation.regions) >= 2
    assert explanation.reasons == {Reason.OPERAND_CAP}
    assert "over numpy's limit of 64 per gufunc" in str(explanation)


def _node(op, kind, inputs, shape=(None,)):
    return Node(op, kind, tuple(inputs), np.dtype("float64"), shape)


def test_explain_names_non_fusible_ops_and_paths_through_them():
    # c = x * x; d = sort(c); e = c + d; f = total(c); g = c - f.  Fusing c's region with
    # {e, g} would make one kernel both feed sort/total and read their results.
    x = _node("arg", INPUT, ())
    c = _node("multiply", ELEMENTWISE, (x, x))
    d = _node("sort", NUMPY, (c,))
    e = _node("add", ELEMENTWISE, (c, d))
    f = _node("total", NUMPY, (c,), shape=())
    g = _node("subtract", ELEMENTWISE, (c, f))
    plan = partition(Graph((x,), (e, g)))
    explanation = inspection.explain(plan.graph, plan.regions, None, "fn", "")
    assert [str(boundary) for boundary in explanation.boundaries] == [
        "region 0 -> sort c at b:f64[n]: not elementwise (sort c runs in numpy: it is not "
        "elementwise)",
        "region 0 -> region 1 at b:f64[n]: not convex (one kernel for both would feed sort c "
        "and also need its result, so it would wait on itself)",
        "region 0 -> total e at b:f64[n]: not elementwise (total e runs in numpy: it is not "
        "elementwise)",
        "sort c -> region 1 at c:f64[n]: not elementwise (sort c runs in numpy: it is not "
        "elementwise)",
        "total e -> region 1 at e:f64[]: not elementwise (total e runs in numpy: it is not "
        "elementwise)",
    ]
    assert explanation.regions[0].outputs == (
        ("b", ("read by region 1", "used by non-fused op c (sort)",
               "used by non-fused op e (total)")),)
    assert explanation.other_steps == ("c:f64[n] = sort b", "e:f64[] = total b")


def test_explain_names_the_boundaries_of_traced_numpy_calls():
    def fn(x):
        scaled = x * 2.0
        return scaled + np.sort(scaled), scaled - np.sum(scaled)

    explanation = _explained(fn, np.ones(5))
    assert explanation.reasons == {Reason.NOT_ELEMENTWISE, Reason.NOT_CONVEX,
                                   Reason.REDUCTION_IN_LOOP}
    assert explanation.other_steps == ("d:f64[n] = sort(c)",)  # the sum is in region 0


def _merge_order_blamed(explanation) -> bool:
    return "merge order" in str(explanation)


def test_a_fused_mean_is_listed_once_and_the_split_blamed_on_it():
    def centred(x):
        m = np.where(x > 0, x, 0.0)
        return m - m.mean(), m.mean()

    explanation = _explained(centred, np.ones(5))
    fused = [text for region in explanation.regions for text in region.equations]
    assert "f:f64[] = mean(e)" in fused
    assert explanation.other_steps == ()  # not also "run by numpy"
    (boundary,) = explanation.boundaries
    assert (boundary.first, boundary.second, boundary.value) == ("region 0", "region 1",
                                                                 "e:f64[n]")
    assert boundary.reason is Reason.REDUCTION_IN_LOOP
    assert boundary.detail == (
        "mean f is complete only after the loop that computes it and g reads it, so g runs "
        "in a later loop; e, computed in that loop, is stored for it")
    assert not _merge_order_blamed(explanation)


def test_softmax_splits_where_a_value_is_needed_after_its_own_reduction():
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    explanation = _explained(softmax, np.ones((4, 5)))
    assert explanation.reasons == {Reason.REDUCTION_IN_LOOP}
    split = next(boundary for boundary in explanation.boundaries
                 if boundary.second == "region 1")
    assert (split.first, split.value) == ("region 0", "d:f64[n,n]")
    assert "sum e is complete only after the loop that computes it" in split.detail
    assert "d, computed in that loop, is stored" in split.detail
    assert not _merge_order_blamed(explanation)


def test_scalar_work_folded_into_a_kernel_is_no_boundary():
    def fn(x, h):
        return x * (-h), x + h

    explanation = _explained(fn, np.ones(5), 0.5)
    (region,) = explanation.regions
    assert region.prelude == ("c:f64[] = negative b",)
    assert explanation.boundaries == ()
    assert "not elementwise" not in str(explanation)
    assert "c:f64[] = negative b  (before the loop)" in str(explanation)


def test_returned_scalar_work_is_explained_as_kept_out_of_the_prelude():
    def fn(x, h):
        s = -h
        return x * s, s

    explanation = _explained(fn, np.ones(5), 0.5)
    kept = next(boundary for boundary in explanation.boundaries
                if boundary.reason is Reason.NOT_IN_PRELUDE)
    assert str(kept) == (
        "region 0 -> region 1 at c:f64[]: scalar work kept out of a prelude (scalar c runs as "
        "a kernel of its own instead of before the loop of d's kernel: it is returned)")


def test_a_data_dependent_size_is_blamed_for_its_split():
    def fn(x, y):
        a = x[x > 0] + 1.0
        return a * y

    explanation = _explained(fn, np.ones(5), np.ones(5))
    by_reason = {boundary.reason: boundary for boundary in explanation.boundaries}
    assert set(by_reason) == {Reason.NOT_ELEMENTWISE, Reason.SIZE_CLASS}
    size = by_reason[Reason.SIZE_CLASS]
    assert (size.first, size.second, size.value) == ("region 1", "region 2", "g:f64[n]")
    assert size.detail.startswith("getitem e: its size depends on the data")
    assert not _merge_order_blamed(explanation)


def test_siblings_of_a_scalar_are_explained():
    def fn(x, y, h):
        return x * h, y + h

    explanation = _explained(fn, np.ones(4), np.ones(5), 2.0)
    (boundary,) = explanation.boundaries
    assert str(boundary).startswith(
        "region 0 and region 1, both reading c:f64[]: siblings of a smaller shared value")


def test_explain_lists_a_kernel_of_passes_in_running_order():
    def standardise(x):
        return (x - x.mean(axis=0)) / x.std(axis=0)

    explanation = _explained(standardise, np.ones((40, 30)))
    (region,) = explanation.regions
    assert region.passes == ("3 passes over the rows (axis 0) of each block of columns; "
                             "accumulators add the rows in order")
    assert region.equations == (
        "b:f64[n] = mean(a, axis=0)  (accumulated in pass 1)",
        "d:f64[1,n] = mean_of(a, axis=0, dtype=None, keepdims=True)  (accumulated in pass 1)",
        "e:f64[n,n] = subtract a d  (pass 2)",
        "f:f64[n,n] = square e  (pass 2)",
        "g:f64[n] = sum_over_count(f, axis=0, dtype=None, keepdims=False, ddof=0)  "
        "(accumulated in pass 2)",
        "h:f64[n] = sqrt g  (per column, after pass 2)",
        "c:f64[n,n] = subtract a b  (pass 3)",
        "i:f64[n,n] = true_divide c h  (pass 3)")
    assert explanation.boundaries == () and explanation.other_steps == ()
    # every intermediate, the means and deviations included, stays in the kernel
    assert explanation.temporaries == ("b", "c", "d", "e", "f", "g", "h")
    assert explanation.bytes_avoided is not None and \
        explanation.bytes_avoided >= 2 * 40 * 30 * 8
    assert "3 passes over the rows (axis 0)" in str(explanation)


def test_explain_says_why_work_is_not_repeated_in_a_later_pass():
    def fn(x):
        e = np.exp(x)
        return e - e.mean(axis=0)

    explanation = _explained(fn, np.ones((4, 5)))
    (boundary,) = explanation.boundaries
    assert boundary.reason is Reason.PASSES
    assert boundary.detail == ("one kernel for both would compute b again in a later pass "
                               "over the rows: 20 more operations per element, more than "
                               "the 3 worth repeating")


def test_explain_says_reductions_over_other_axes_need_other_kernels():
    def fn(x):
        d = x * 2.0
        return d.sum(axis=0), d.sum(axis=1)

    explanation = _explained(fn, np.ones((4, 5, 6)))
    (boundary,) = [boundary for boundary in explanation.boundaries
                   if boundary.reason is Reason.REDUCED_AXES]
    assert boundary.detail == ("one kernel cannot run both: they accumulate reductions over "
                               "different axes, and one kernel's rows run along one set of "
                               "axes")
