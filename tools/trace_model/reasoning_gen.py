#!/usr/bin/env python3
"""Synthetic step-by-step reasoning text in R1's chat format (the trace model's "reasoning" genre).

No package registry offers R1-style chains of thought, so they are generated: each document is

    <｜User｜>{problem}<｜Assistant｜><think>\\n{long worked reasoning}\\n</think>\\n\\n{short answer}

with problems drawn from 16 families (multi-digit multiplication by partial products, long
division, linear equations, 2x2 systems, Euclid's gcd and lcm, prime factorization, fractions,
word problems on rates / prices / work / ages, arithmetic series, base conversion, quadratics with
integer roots, percentages, binomial coefficients, primality by trial division, tracing a small
Python loop, sorting by insertion) and R1's habits in the thinking part: restating the task,
"Let me ...", "Wait, ...", re-checking a result another way, occasional false starts that get
corrected. Every number in the text is computed, so the worked steps are right. 1-3 problems per
document (a short multi-turn session). Deterministic for a given seed.

  python3 tools/trace_model/reasoning_gen.py --seed 1 --n 2     # print two documents
"""
import argparse
import math
import random

OPEN = ["Okay, so I need to {t}.", "Alright, let me figure out how to {t}.", "Let's see. The task is to {t}.",
        "Hmm, I have to {t}.", "Okay, the question asks me to {t}.", "So I'm asked to {t}."]
THEN = ["Let me", "I'll", "Now I'll", "Next, let me", "OK, now I"]
CHECK = ["Let me double-check that.", "Wait, let me verify this another way.", "Hmm, let me make sure that's right.",
         "Let me check the arithmetic again.", "Just to be safe, I'll verify.", "Wait, is that right? Let me redo it."]
CONFIRM = ["Yes, that matches.", "Good, same result.", "OK, that checks out.", "Right, consistent.",
           "So that's confirmed.", "Great, it agrees."]
CLOSE = ["So the answer is {a}.", "Therefore, the answer is {a}.", "So, putting it together: {a}.",
         "That gives {a}.", "I'm fairly confident now: {a}."]
NAMES = ["Alice", "Bob", "Carlos", "Dana", "Emeka", "Fatima", "Grace", "Hiro", "Ivan", "Jia", "Kofi", "Lena",
         "Maya", "Nikhil", "Olga", "Pedro", "Quinn", "Rosa", "Sam", "Tariq", "Uma", "Victor", "Wen", "Yusuf"]
ITEMS = [("notebook", "notebooks"), ("pencil", "pencils"), ("apple", "apples"), ("ticket", "tickets"),
         ("book", "books"), ("cup of coffee", "cups of coffee"), ("shirt", "shirts"), ("bag of rice", "bags of rice")]


def w(n):
    return f"{n:,}" if abs(n) >= 10000 else str(n)


class Doc:
    def __init__(self, rng):
        self.r = rng
        self.lines = []

    def say(self, s):
        self.lines.append(s)

    def pick(self, xs, **kw):
        s = self.r.choice(xs)
        return s.format(**kw) if kw else s

    def text(self):
        out, para = [], []
        for line in self.lines:
            para.append(line)
            if self.r.random() < 0.35:
                out.append(" ".join(para))
                para = []
        if para:
            out.append(" ".join(para))
        return "\n\n".join(out)


# ------------------------------------------------------------------------------------------------
# problem families: each returns (question, answer text) and writes reasoning into d

def multiply(d):
    r = d.r
    a, b = r.randint(12, 9999), r.randint(12, 999)
    q = f"What is {a} × {b}?"
    d.say(d.pick(OPEN, t=f"compute {a} times {b}"))
    d.say(f"{d.pick(THEN)} break {b} into its place values and multiply {a} by each part.")
    parts = []
    for place, digit in enumerate(reversed(str(b))):
        v = int(digit) * 10 ** place
        if v == 0:
            d.say(f"The {10 ** place}s digit is 0, so that part contributes nothing.")
            continue
        p = a * v
        parts.append(p)
        d.say(f"{a} × {v} = {w(p)}, because {a} × {digit} = {a * int(digit)} and then I shift by {place} place(s).")
    s = 0
    for p in parts:
        d.say(f"Adding {w(p)} to the running total {w(s)} gives {w(s + p)}.")
        s += p
    d.say(d.pick(CHECK))
    lo, hi = a * (b - b % 10), a * (b % 10)
    d.say(f"Another way: {a} × {b - b % 10} = {w(lo)} and {a} × {b % 10} = {w(hi)}, sum {w(lo + hi)}.")
    d.say(d.pick(CONFIRM))
    d.say(d.pick(CLOSE, a=w(a * b)))
    return q, f"{a} × {b} = **{w(a * b)}**"


def long_division(d):
    r = d.r
    b = r.randint(3, 97)
    a = r.randint(b * 10, 99999)
    q = f"Divide {a} by {b}. Give the quotient and the remainder."
    d.say(d.pick(OPEN, t=f"divide {a} by {b} with remainder"))
    d.say("I'll do long division digit by digit.")
    rem, quot = 0, ""
    for ch in str(a):
        cur = rem * 10 + int(ch)
        k = cur // b
        d.say(f"Bring down {ch}: the current value is {cur}. {b} goes into {cur} {k} time(s) "
              f"({b} × {k} = {b * k}), remainder {cur - b * k}.")
        rem = cur - b * k
        quot += str(k)
    quot = int(quot)
    d.say(f"So the quotient is {quot} and the remainder is {rem}.")
    d.say(d.pick(CHECK))
    d.say(f"{b} × {quot} = {b * quot}, plus {rem} is {b * quot + rem}, which should equal {a}.")
    d.say(d.pick(CONFIRM))
    return q, f"{a} = {b} × {quot} + {rem}: quotient **{quot}**, remainder **{rem}**."


def linear_eq(d):
    r = d.r
    x = r.randint(-20, 20)
    a, c = r.choice([i for i in range(-9, 10) if i]), r.randint(-9, 9)
    while c == a:
        c = r.randint(-9, 9)
    b = r.randint(-50, 50)
    dd = (a - c) * x + b
    q = f"Solve for x: {a}x + {b} = {c}x + {dd}."
    d.say(d.pick(OPEN, t="solve this linear equation for x"))
    d.say(f"The equation is {a}x + {b} = {c}x + {dd}. I want all the x terms on one side.")
    d.say(f"Subtract {c}x from both sides: {a - c}x + {b} = {dd}.")
    d.say(f"Subtract {b} from both sides: {a - c}x = {dd - b}.")
    d.say(f"Divide by {a - c}: x = {dd - b} / {a - c} = {x}.")
    d.say(d.pick(CHECK))
    d.say(f"Left side: {a} × {x} + {b} = {a * x + b}. Right side: {c} × {x} + {dd} = {c * x + dd}.")
    d.say(d.pick(CONFIRM) if a * x + b == c * x + dd else "They differ, so I made a mistake somewhere.")
    return q, f"x = **{x}**"


def system2(d):
    r = d.r
    x, y = r.randint(-12, 12), r.randint(-12, 12)
    while True:
        a, b, c, e = (r.randint(-7, 7) for _ in range(4))
        if a and b and c and e and a * e - b * c != 0:
            break
    p, s = a * x + b * y, c * x + e * y
    q = f"Solve the system: {a}x + {b}y = {p} and {c}x + {e}y = {s}."
    d.say(d.pick(OPEN, t="solve a system of two linear equations"))
    d.say(f"Equation (1): {a}x + {b}y = {p}. Equation (2): {c}x + {e}y = {s}.")
    d.say(f"I'll eliminate x. Multiply (1) by {c} and (2) by {a}.")
    d.say(f"(1) × {c}: {a * c}x + {b * c}y = {p * c}. (2) × {a}: {a * c}x + {a * e}y = {s * a}.")
    coef, rhs = b * c - a * e, p * c - s * a
    d.say(f"Subtracting the second from the first: ({b * c} - {a * e})y = {p * c} - {s * a}, so {coef}y = {rhs}.")
    d.say(f"y = {rhs} / {coef} = {y}.")
    d.say(f"Substitute y = {y} into (1): {a}x + {b} × {y} = {p}, so {a}x = {p} - {b * y} = {p - b * y}, x = {x}.")
    d.say(d.pick(CHECK))
    d.say(f"Check (2): {c} × {x} + {e} × {y} = {c * x} + {e * y} = {c * x + e * y}. It should be {s}.")
    d.say(d.pick(CONFIRM))
    return q, f"x = **{x}**, y = **{y}**"


def gcd_lcm(d):
    r = d.r
    g = r.randint(2, 40)
    a, b = g * r.randint(2, 60), g * r.randint(2, 60)
    q = f"Find the greatest common divisor and the least common multiple of {a} and {b}."
    d.say(d.pick(OPEN, t=f"find gcd({a}, {b}) and lcm({a}, {b})"))
    d.say("Euclid's algorithm: replace the larger number by the remainder of dividing it by the smaller.")
    x, y = max(a, b), min(a, b)
    while y:
        d.say(f"{x} = {y} × {x // y} + {x % y}.")
        x, y = y, x % y
    d.say(f"The remainder reached 0, so gcd = {x}.")
    lcm = a * b // x
    d.say(f"Then lcm = {a} × {b} / {x} = {a * b} / {x} = {lcm}.")
    d.say(d.pick(CHECK))
    d.say(f"{lcm} / {a} = {lcm // a} and {lcm} / {b} = {lcm // b}, both whole numbers. {d.pick(CONFIRM)}")
    return q, f"gcd = **{x}**, lcm = **{lcm}**"


def factorize(d):
    r = d.r
    n = 1
    for _ in range(r.randint(2, 6)):
        n *= r.choice([2, 2, 2, 3, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31])
    q = f"Find the prime factorization of {n}."
    d.say(d.pick(OPEN, t=f"factor {n} into primes"))
    m, p, fs = n, 2, []
    while m > 1:
        if m % p == 0:
            d.say(f"{m} is divisible by {p}: {m} / {p} = {m // p}.")
            fs.append(p)
            m //= p
        else:
            d.say(f"{m} is not divisible by {p} (remainder {m % p}), so I move on.")
            p += 1 if p == 2 else 2
    d.say("Now the quotient is 1, so I'm done.")
    counts = {}
    for f in fs:
        counts[f] = counts.get(f, 0) + 1
    form = " × ".join(f"{f}^{c}" if c > 1 else str(f) for f, c in sorted(counts.items()))
    d.say(d.pick(CHECK))
    prod = 1
    for f in fs:
        prod *= f
    d.say(f"Multiplying back: {' × '.join(map(str, fs))} = {prod}. {d.pick(CONFIRM)}")
    return q, f"{n} = **{form}**"


def fractions(d):
    r = d.r
    a, b, c, e = r.randint(1, 12), r.randint(2, 15), r.randint(1, 12), r.randint(2, 15)
    op = r.choice(["+", "-"])
    q = f"Compute {a}/{b} {op} {c}/{e} and simplify."
    d.say(d.pick(OPEN, t=f"work out {a}/{b} {op} {c}/{e}"))
    L = b * e // math.gcd(b, e)
    d.say(f"The denominators are {b} and {e}; their least common multiple is {L}.")
    na, nc = a * (L // b), c * (L // e)
    d.say(f"{a}/{b} = {na}/{L} (multiply top and bottom by {L // b}), and {c}/{e} = {nc}/{L} (by {L // e}).")
    num = na + nc if op == "+" else na - nc
    d.say(f"So the result is ({na} {op} {nc})/{L} = {num}/{L}.")
    g = math.gcd(abs(num), L)
    if g > 1:
        d.say(f"Both {num} and {L} are divisible by {g}, so it simplifies to {num // g}/{L // g}.")
    else:
        d.say(f"gcd({abs(num)}, {L}) = 1, so it is already in lowest terms.")
    d.say(d.pick(CHECK))
    d.say(f"As decimals: {a / b:.4f} {op} {c / e:.4f} = {(a / b + c / e) if op == '+' else (a / b - c / e):.4f}, "
          f"and {num // g}/{L // g} = {num / L:.4f}. {d.pick(CONFIRM)}")
    return q, f"**{num // g}/{L // g}**"


def word_problem(d):
    r = d.r
    kind = r.randrange(4)
    n1, n2 = r.sample(NAMES, 2)
    if kind == 0:
        v, t1, t2 = r.randint(30, 120), r.randint(1, 5), r.randint(10, 59)
        q = (f"{n1} drives at {v} km/h for {t1} hours and {t2} minutes. How far does {n1} travel?")
        d.say(d.pick(OPEN, t="find a distance from a speed and a time"))
        d.say(f"Distance = speed × time. The time is {t1} h {t2} min; {t2} minutes is {t2}/60 = {t2 / 60:.4f} hours.")
        t = t1 + t2 / 60
        d.say(f"So t = {t:.4f} h and the distance is {v} × {t:.4f} = {v * t:.2f} km.")
        d.say(d.pick(CHECK))
        d.say(f"In {t1} hours: {v * t1} km. In {t2} minutes: {v} × {t2} / 60 = {v * t2 / 60:.2f} km. "
              f"Total {v * t1 + v * t2 / 60:.2f} km. {d.pick(CONFIRM)}")
        return q, f"**{v * t:.2f} km**"
    if kind == 1:
        (s, pl), n, price, disc = r.choice(ITEMS), r.randint(3, 40), r.randint(2, 90), r.choice([5, 10, 15, 20, 25, 30])
        q = (f"{n1} buys {n} {pl} at ${price} each and gets a {disc}% discount on the total. "
             f"How much does {n1} pay?")
        d.say(d.pick(OPEN, t="work out the price after a discount"))
        tot = n * price
        d.say(f"Before the discount: {n} × ${price} = ${tot}.")
        off = tot * disc / 100
        d.say(f"The discount is {disc}% of ${tot} = {tot} × {disc} / 100 = ${off:.2f}.")
        d.say(f"So {n1} pays ${tot} - ${off:.2f} = ${tot - off:.2f}.")
        d.say(d.pick(CHECK))
        d.say(f"Paying {100 - disc}% of ${tot}: {tot} × {(100 - disc) / 100:.2f} = ${tot * (100 - disc) / 100:.2f}. "
              f"{d.pick(CONFIRM)}")
        return q, f"**${tot - off:.2f}**"
    if kind == 2:
        a, b = r.randint(2, 12), r.randint(2, 12)
        q = (f"{n1} can paint a fence in {a} hours and {n2} can paint it in {b} hours. "
             f"How long do they take working together?")
        d.say(d.pick(OPEN, t="combine two work rates"))
        d.say(f"{n1} paints 1/{a} of the fence per hour, {n2} paints 1/{b} per hour.")
        d.say(f"Together: 1/{a} + 1/{b} = {b}/{a * b} + {a}/{a * b} = {a + b}/{a * b} of the fence per hour.")
        t = a * b / (a + b)
        d.say(f"The time is the reciprocal: {a * b}/{a + b} = {t:.4f} hours, about {int(t)} h {round((t - int(t)) * 60)} min.")
        d.say(d.pick(CHECK))
        d.say(f"In {t:.4f} h, {n1} does {t / a:.4f} and {n2} does {t / b:.4f}; the sum is {t / a + t / b:.4f}. "
              f"{d.pick(CONFIRM)}")
        return q, f"**{a * b}/{a + b} ≈ {t:.2f} hours**"
    age, diff, yrs = r.randint(4, 30), r.randint(15, 40), r.randint(2, 15)
    q = (f"{n1} is {diff} years older than {n2}. In {yrs} years, {n1} will be "
         f"{(age + diff + yrs)} and the sum of their ages will be {2 * age + diff + 2 * yrs}. How old is {n2} now?")
    d.say(d.pick(OPEN, t=f"find {n2}'s age"))
    d.say(f"Let {n2}'s age now be a. Then {n1} is a + {diff}.")
    d.say(f"In {yrs} years the sum is (a + {yrs}) + (a + {diff} + {yrs}) = 2a + {diff + 2 * yrs}.")
    d.say(f"Setting 2a + {diff + 2 * yrs} = {2 * age + diff + 2 * yrs} gives 2a = {2 * age}, a = {age}.")
    d.say(d.pick(CHECK))
    d.say(f"{n1} would be {age + diff} now and {age + diff + yrs} in {yrs} years, as stated. {d.pick(CONFIRM)}")
    return q, f"{n2} is **{age}** years old."


def series(d):
    r = d.r
    a, step, n = r.randint(-20, 50), r.randint(1, 15), r.randint(5, 40)
    last = a + (n - 1) * step
    q = f"Find the sum of the arithmetic sequence {a}, {a + step}, {a + 2 * step}, ..., {last}."
    d.say(d.pick(OPEN, t="add up an arithmetic sequence"))
    d.say(f"The first term is {a} and the common difference is {step}.")
    d.say(f"Number of terms: ({last} - {a}) / {step} + 1 = {(last - a) // step} + 1 = {n}.")
    s = n * (a + last) // 2
    d.say(f"Sum = n × (first + last) / 2 = {n} × ({a} + {last}) / 2 = {n} × {a + last} / 2 = {s}.")
    d.say(d.pick(CHECK))
    run, shown = 0, []
    for i in range(n):
        run += a + i * step
        if i < 4 or i == n - 1:
            shown.append(f"after term {i + 1}: {run}")
    d.say("Adding term by term: " + "; ".join(shown) + ". " + d.pick(CONFIRM))
    return q, f"The sum is **{s}**."


def base_conv(d):
    r = d.r
    n = r.randint(5, 5000)
    base = r.choice([2, 2, 8, 16, 3, 5])
    digits = "0123456789ABCDEF"
    q = f"Convert {n} to base {base}."
    d.say(d.pick(OPEN, t=f"write {n} in base {base}"))
    d.say(f"I'll repeatedly divide by {base} and collect the remainders.")
    m, out = n, []
    while m:
        d.say(f"{m} / {base} = {m // base} remainder {m % base}.")
        out.append(digits[m % base])
        m //= base
    res = "".join(reversed(out))
    d.say(f"Reading the remainders from last to first: {res}.")
    d.say(d.pick(CHECK))
    terms = [f"{digits.index(c)}×{base}^{len(res) - 1 - i}" for i, c in enumerate(res) if c != "0"]
    d.say(f"{' + '.join(terms)} = {int(res, base)}. {d.pick(CONFIRM)}")
    return q, f"{n} = **{res}** in base {base}"


def quadratic(d):
    r = d.r
    p, s, k = r.randint(-12, 12), r.randint(-12, 12), r.choice([1, 1, 1, 2, 3])
    b, c = -k * (p + s), k * p * s
    q = f"Solve {k}x² + ({b})x + ({c}) = 0."
    d.say(d.pick(OPEN, t="solve a quadratic equation"))
    D = b * b - 4 * k * c
    d.say(f"a = {k}, b = {b}, c = {c}. The discriminant is b² - 4ac = {b * b} - {4 * k * c} = {D}.")
    rt = math.isqrt(D)
    d.say(f"√{D} = {rt}, since {rt}² = {rt * rt}.")
    x1, x2 = (-b + rt) / (2 * k), (-b - rt) / (2 * k)
    d.say(f"x = (-b ± √D) / (2a) = ({-b} ± {rt}) / {2 * k}, so x₁ = {x1:g} and x₂ = {x2:g}.")
    d.say(d.pick(CHECK))
    d.say(f"Sum of roots {x1 + x2:g} should be -b/a = {-b / k:g}; product {x1 * x2:g} should be c/a = {c / k:g}. "
          f"{d.pick(CONFIRM)}")
    return q, f"x = **{x1:g}** or x = **{x2:g}**"


def percent(d):
    r = d.r
    old, new = r.randint(20, 2000), r.randint(20, 2000)
    q = f"A price changes from {old} to {new}. What is the percentage change?"
    d.say(d.pick(OPEN, t="compute a percentage change"))
    ch = new - old
    d.say(f"The change is {new} - {old} = {ch}.")
    d.say(f"Relative to the original: {ch} / {old} = {ch / old:.5f}, i.e. {100 * ch / old:.2f}%.")
    d.say(d.pick(CHECK))
    d.say(f"{old} × (1 + {ch / old:.5f}) = {old * (1 + ch / old):.2f}, which is {new}. {d.pick(CONFIRM)}")
    return q, f"**{100 * ch / old:+.2f}%**"


def binomial(d):
    r = d.r
    n = r.randint(5, 22)
    k = r.randint(2, min(7, n - 1))
    q = f"In how many ways can a committee of {k} be chosen from {n} people?"
    d.say(d.pick(OPEN, t=f"count the {k}-element subsets of {n} people"))
    d.say(f"Order doesn't matter, so it's C({n}, {k}) = {n}! / ({k}! × {n - k}!).")
    num = 1
    for i in range(k):
        d.say(f"Numerator so far: {num} × {n - i} = {num * (n - i)}.")
        num *= n - i
    den = math.factorial(k)
    d.say(f"{k}! = {den}. So C({n}, {k}) = {num} / {den} = {num // den}.")
    d.say(d.pick(CHECK))
    d.say(f"Pascal's rule: C({n - 1}, {k - 1}) + C({n - 1}, {k}) = {math.comb(n - 1, k - 1)} + {math.comb(n - 1, k)} "
          f"= {math.comb(n, k)}. {d.pick(CONFIRM)}")
    return q, f"**{math.comb(n, k)}** ways"


def primality(d):
    r = d.r
    n = r.randint(50, 4000) | 1
    q = f"Is {n} a prime number?"
    d.say(d.pick(OPEN, t=f"decide whether {n} is prime"))
    lim = math.isqrt(n)
    d.say(f"I only need to try divisors up to √{n} ≈ {math.sqrt(n):.2f}, so up to {lim}.")
    found = None
    for p in range(3, lim + 1, 2):
        if n % p == 0:
            d.say(f"{n} / {p} = {n // p} exactly. So {p} divides {n}.")
            found = p
            break
        d.say(f"{n} / {p} leaves remainder {n % p}.")
    if found:
        d.say(f"Wait, let me confirm: {found} × {n // found} = {found * (n // found)}. {d.pick(CONFIRM)}")
        return q, f"No: {n} = {found} × {n // found}."
    d.say(f"No divisor up to {lim} works, and {n} is odd, so it is prime.")
    return q, f"Yes, **{n} is prime**."


def trace_loop(d):
    r = d.r
    a, b, m = r.randint(0, 9), r.randint(1, 9), r.randint(4, 9)
    n = r.randint(4, 9)
    code = f"x = {a}\nfor i in range({n}):\n    if i % 2 == 0:\n        x = x + {b} * i\n    else:\n        x = (x * 2) % {m * 7}\nprint(x)"
    q = f"What does this Python code print?\n\n```python\n{code}\n```"
    d.say(d.pick(OPEN, t="trace this Python loop by hand"))
    d.say(f"x starts at {a}. The loop runs i = 0 to {n - 1}.")
    x = a
    for i in range(n):
        if i % 2 == 0:
            d.say(f"i = {i} is even: x = {x} + {b} × {i} = {x + b * i}.")
            x = x + b * i
        else:
            d.say(f"i = {i} is odd: x = ({x} × 2) % {m * 7} = {x * 2} % {m * 7} = {(x * 2) % (m * 7)}.")
            x = (x * 2) % (m * 7)
    d.say(f"After the loop x = {x}, so it prints {x}.")
    d.say(d.pick(CHECK))
    d.say(f"Going over the even steps again, they add {b} times {', '.join(str(i) for i in range(0, n, 2))}; "
          f"the odd steps double and reduce mod {m * 7}. Same sequence. {d.pick(CONFIRM)}")
    return q, f"It prints **{x}**."


def insertion_sort(d):
    r = d.r
    xs = [r.randint(-50, 99) for _ in range(r.randint(5, 9))]
    q = f"Sort the list {xs} in ascending order using insertion sort, showing the steps."
    d.say(d.pick(OPEN, t="sort a list with insertion sort"))
    a = list(xs)
    for i in range(1, len(a)):
        key, j = a[i], i - 1
        moves = 0
        while j >= 0 and a[j] > key:
            a[j + 1] = a[j]
            j -= 1
            moves += 1
        a[j + 1] = key
        d.say(f"Insert {key}: it moves past {moves} larger element(s); the list is now {a}.")
    d.say(d.pick(CHECK))
    d.say(f"Each element is ≤ the next: {all(a[i] <= a[i + 1] for i in range(len(a) - 1))}. "
          f"And it has the same {len(a)} elements. {d.pick(CONFIRM)}")
    return q, f"**{a}**"


FAMILIES = [multiply, long_division, linear_eq, system2, gcd_lcm, factorize, fractions, word_problem,
            series, base_conv, quadratic, percent, binomial, primality, trace_loop, insertion_sort]


def document(rng):
    """One chat document (1-3 problems answered in turn), without BOS/EOS."""
    out = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        d = Doc(rng)
        fam = rng.choice(FAMILIES)
        q, a = fam(d)
        if rng.random() < 0.3:  # a second, related problem inside the same thought
            d.say(rng.choice(["Hmm, before answering, let me also try a similar case to be sure I have the method right.",
                              "Wait, I want to sanity-check the method on another example."]))
            fam(d)
            d.say("OK, the method works. Back to the original question.")
        d.say(d.pick(CLOSE, a=a.replace("**", "")))
        out.append(f"<｜User｜>{q}<｜Assistant｜><think>\n{d.text()}\n</think>\n\n{a}")
    return "".join(out)


def documents(n, seed):
    rng = random.Random(seed)
    return [document(rng) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=2)
    args = ap.parse_args()
    for t in documents(args.n, args.seed):
        print(t)
        print("=" * 80)


if __name__ == "__main__":
    main()
