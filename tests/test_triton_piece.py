"""Lesson 10's Triton piece: the online-softmax loop as a @triton.jit kernel, run by Triton's interpreter
and checked against the package's kernel. A right kernel passes; each planted mistake is named in one line;
a stub says "not written yet"; a plain Python function is told to be a kernel. (tests/conftest.py sets
TRITON_INTERPRET=1 before triton is imported when there is no GPU.)"""

import pytest
import triton
import triton.language as tl

from minialbert.course.pieces import check

# ------------------------------------------------------------------ kernels written as a learner would


@triton.jit
def right(Q, K, V, O, n_keys, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + rows[:, None] * HEAD_DIM + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, n_keys, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + cols[:, None] * HEAD_DIM + offs_d[None, :])
        v = tl.load(V + cols[:, None] * HEAD_DIM + offs_d[None, :])
        s = tl.dot(q, tl.trans(k)) * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    tl.store(O + rows[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def wrong(Q, K, V, O, n_keys, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
          MISTAKE: tl.constexpr):
    """The right kernel with one mistake: 1 no rescaling, 2 exp for exp2, 3 no qk_scale, 4 the running sum
    not rescaled (only the accumulator)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + rows[:, None] * HEAD_DIM + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, n_keys, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + cols[:, None] * HEAD_DIM + offs_d[None, :])
        v = tl.load(V + cols[:, None] * HEAD_DIM + offs_d[None, :])
        s = tl.dot(q, tl.trans(k))
        if MISTAKE != 3:
            s = s * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if MISTAKE == 2:
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
        else:
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
        if MISTAKE == 1:
            alpha = tl.full([BLOCK_M], 1.0, tl.float32)
        if MISTAKE == 4:
            l_i = l_i + tl.sum(p, 1)
        else:
            l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    tl.store(O + rows[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None])


# the check launches a kernel with the lesson's signature: one per mistake, each calling `wrong`
@triton.jit
def no_rescaling(Q, K, V, O, n_keys, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr):
    wrong(Q, K, V, O, n_keys, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, 1)


@triton.jit
def exp_for_exp2(Q, K, V, O, n_keys, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr):
    wrong(Q, K, V, O, n_keys, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, 2)


@triton.jit
def no_scale(Q, K, V, O, n_keys, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr):
    wrong(Q, K, V, O, n_keys, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, 3)


@triton.jit
def sum_not_rescaled(Q, K, V, O, n_keys, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    wrong(Q, K, V, O, n_keys, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, 4)


@triton.jit
def unwritten(Q, K, V, O, n_keys, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    for _start_n in range(0, n_keys, BLOCK_N):
        raise NotImplementedError("Exercise: the loop's body")


def verdict(capsys, piece) -> tuple[bool, str]:
    ok = check("online_softmax_triton", piece)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"not one line: {out!r}"
    return ok, out


def test_a_right_kernel_matches_the_package_kernel(capsys):
    ok, out = verdict(capsys, right)
    assert ok and out.startswith("online_softmax_triton: right: matches the package on 3 random inputs"), out


@pytest.mark.parametrize("kernel, said", [
    (no_rescaling, "that is what not rescaling the running sum and accumulator when the maximum grows gives"),
    (exp_for_exp2, "that is what tl.exp instead of tl.exp2"),
    (no_scale, "that is what leaving out qk_scale gives"),
    (sum_not_rescaled, " values differ, by up to "),      # a mistake without a name: the first position
], ids=["no rescaling", "exp for exp2", "no scale", "sum not rescaled"])
def test_each_planted_mistake_is_wrong_and_named(capsys, kernel, said):
    ok, out = verdict(capsys, kernel)
    assert not ok and out.startswith("online_softmax_triton: wrong: values differ at [") and said in out, out


def test_a_stub_says_not_written_yet(capsys):
    ok, out = verdict(capsys, unwritten)
    assert not ok and out.startswith("online_softmax_triton: not written yet (Exercise: the loop's"), out


def test_a_python_function_is_told_to_be_a_kernel(capsys):
    ok, out = verdict(capsys, right.fn)
    assert not ok and "put @triton.jit above its def" in out, out
