# A multi-task grader built only on the standard library's C extension modules,
# for Pythons without numpy. input["task"] picks the check:
#   "sql":     text-to-SQL: run the output query and expected["query"] on an
#              in-memory sqlite3 database built from input["schema"]/["rows"];
#              equal result multisets (ordered lists when the gold query has
#              ORDER BY) score 1, else the Jaccard overlap of the row sets.
#   "invoice": the output is an XML invoice, parsed with xml.parsers.expat;
#              the total is compared exactly as decimal.Decimal (quantised to
#              cents), the date with datetime (strptime), the customer name
#              after unicodedata NFKC + accent stripping + casefold.
#   "record":  the output is JSON (json, i.e. _json); the canonical form's
#              hashlib.sha256 must equal expected["sha256"] for full marks,
#              else the fraction of matching fields.
#   "summary": zlib normalised compression distance between output and
#              expected["text"]: score = 1 - NCD, with the CRC32s in feedback.
import datetime
import decimal
import hashlib
import json
import sqlite3
import unicodedata
import xml.parsers.expat
import zlib

CENTS = decimal.Decimal("0.01")


def run_sql(schema, rows, query):
    con = sqlite3.connect(":memory:")
    try:
        con.executescript(schema)
        for table, data in rows.items():
            if data:
                marks = ",".join("?" * len(data[0]))
                con.executemany(f"INSERT INTO {table} VALUES ({marks})", data)
        return [tuple(r) for r in con.execute(query).fetchall()]
    finally:
        con.close()


def grade_sql(input, output, expected):
    gold = run_sql(input["schema"], input["rows"], expected["query"])
    try:
        got = run_sql(input["schema"], input["rows"], output)
    except sqlite3.Error as e:
        return 0.0, f"The query failed: {type(e).__name__}: {e}."
    ordered = "order by" in expected["query"].lower()
    same = got == gold if ordered else sorted(got, key=repr) == sorted(gold, key=repr)
    if same:
        return 1.0, f"Same {len(gold)} row(s) as the reference query" + (" in the same order." if ordered else ".")
    a, b = set(got), set(gold)
    jac = len(a & b) / len(a | b) if a | b else 1.0
    if a == b:
        return 0.5, "Right rows, wrong order or multiplicity."
    return jac, f"Returned {len(got)} row(s), {len(a & b)} of the {len(b)} expected; e.g. expected {sorted(gold, key=repr)[:2]!r}."


def parse_invoice(text):
    fields, stack = {}, []
    parser = xml.parsers.expat.ParserCreate(encoding="utf-8")

    def start(name, attrs):
        stack.append(name)
        if name == "total" and "currency" in attrs:
            fields["currency"] = attrs["currency"]

    def end(name):
        stack.pop()

    def chars(data):
        if stack:
            fields[stack[-1]] = fields.get(stack[-1], "") + data

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, chars
    parser.Parse(text.encode("utf-8"), True)
    return {k: v.strip() for k, v in fields.items()}


def fold(name):
    s = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name))
    s = "".join(ch for ch in s if not unicodedata.combining(ch))
    return " ".join(s.casefold().split())


def grade_invoice(input, output, expected):
    try:
        f = parse_invoice(output)
    except xml.parsers.expat.ExpatError as e:
        return 0.0, f"Not well-formed XML: {xml.parsers.expat.ErrorString(e.code)} at line {e.lineno}, column {e.offset}."
    checks, notes = 0, []
    with decimal.localcontext() as ctx:
        ctx.prec = 28
        ctx.traps[decimal.Inexact] = False
        try:
            total = decimal.Decimal(f.get("total", "").replace(",", "")).quantize(CENTS, rounding=decimal.ROUND_HALF_EVEN)
        except decimal.InvalidOperation:
            total = None
        want = decimal.Decimal(expected["total"])
        if total == want:
            checks += 1
        else:
            notes.append(f"total {total} != {want}")
    try:
        date = datetime.datetime.strptime(f.get("date", ""), input.get("date_format", "%Y-%m-%d")).date()
    except ValueError as e:
        date, notes = None, notes + [f"date unreadable ({e})"]
    if date == datetime.date.fromisoformat(expected["date"]):
        checks += 1
    elif date is not None:
        notes.append(f"date {date.isoformat()} is {(date - datetime.date.fromisoformat(expected['date'])).days:+d} days off")
    if fold(f.get("customer", "")) == fold(expected["customer"]):
        checks += 1
    else:
        notes.append(f"customer {f.get('customer', '')!r} != {expected['customer']!r}")
    return checks / 3, ("All 3 fields right." if checks == 3 else f"{checks}/3 fields right: " + "; ".join(notes) + ".")


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def grade_record(input, output, expected):
    try:
        got = json.loads(output) if isinstance(output, str) else output
    except json.JSONDecodeError as e:
        return 0.0, f"Not JSON: {e.msg} at position {e.pos}."
    digest = hashlib.sha256(canonical(got).encode("utf-8")).hexdigest()
    if digest == expected["sha256"]:
        return 1.0, f"Exact record (sha256 {digest[:12]})."
    want = expected["record"]
    if not isinstance(got, dict):
        return 0.0, f"Expected a JSON object, got {type(got).__name__}."
    right = [k for k in want if k in got and canonical(got[k]) == canonical(want[k])]
    wrong = sorted(set(want) - set(right))
    return len(right) / len(want), f"{len(right)}/{len(want)} fields right; check {', '.join(wrong)} (sha256 {digest[:12]})."


def grade_summary(input, output, expected):
    x, y = str(output).encode("utf-8"), expected["text"].encode("utf-8")
    cx, cy, cxy = (len(zlib.compress(b, 9)) for b in (x, y, x + b" " + y))
    ncd = (cxy - min(cx, cy)) / max(cx, cy)
    sim = max(0.0, min(1.0, 1.0 - ncd))
    return sim, f"Compression similarity {sim:.3f} (NCD {ncd:.3f}; crc32 {zlib.crc32(x):08x} vs {zlib.crc32(y):08x})."


TASKS = {"sql": grade_sql, "invoice": grade_invoice, "record": grade_record, "summary": grade_summary}


def score(input, output, expected=None):
    s, feedback = TASKS[input["task"]](input, output, expected)
    return s, {"feedback": feedback}
