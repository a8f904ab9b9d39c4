// A node:test reporter that prints the interop matrix: one row per case, one
// column per binding, and a passed/total line per binding. Test names are
// "<binding> :: <case>" (see the *.test.mjs files). Skipped cells show
// "skip" and their reasons are listed under the table; failures are listed
// with their first message line (the spec reporter, on stderr, has the
// details).
//
// Usage: node --test --test-reporter=spec --test-reporter-destination=stderr \
//          --test-reporter=../table-reporter.mjs --test-reporter-destination=stdout ...
//
// A2A_INTEROP_TITLE names the table (default: "interop").

export default async function* tableReporter(source) {
  const cells = new Map(); // case -> Map(binding -> {status, note})
  const bindings = [];
  const notes = [];
  const skips = new Map(); // binding + reason -> the cases skipped for it
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const name = event.data.name ?? '';
    const sep = name.indexOf(' :: ');
    if (sep < 0) continue;
    // Cases filtered out by --test-name-pattern are not part of the run.
    if (String(event.data.skip ?? '').includes('does not match pattern')) continue;
    const binding = name.slice(0, sep);
    const kase = name.slice(sep + 4);
    if (!bindings.includes(binding)) bindings.push(binding);
    if (!cells.has(kase)) cells.set(kase, new Map());
    let status;
    if (event.type === 'test:fail') {
      status = 'FAIL';
      const err = event.data.details?.error;
      const msg = String(err?.cause?.message ?? err?.message ?? err ?? '').split('\n')[0];
      notes.push(`FAIL ${binding} ${kase}: ${msg}`);
    } else if (event.data.skip !== undefined) {
      status = 'skip';
      const reason = event.data.skip === true ? 'skipped' : String(event.data.skip);
      const key = `${binding}\u0000${reason}`;
      if (!skips.has(key)) skips.set(key, { binding, reason, cases: [] });
      skips.get(key).cases.push(kase);
    } else {
      status = 'ok';
    }
    cells.get(kase).set(binding, status);
  }

  const title = process.env.A2A_INTEROP_TITLE || 'interop';
  const caseWidth = Math.max(12, ...[...cells.keys()].map((k) => k.length));
  const colWidth = Math.max(8, ...bindings.map((b) => b.length));
  const pad = (s, w) => s + ' '.repeat(Math.max(0, w - s.length));
  const lines = [];
  lines.push('');
  lines.push(`== ${title}`);
  lines.push(`${pad('case', caseWidth)}  ${bindings.map((b) => pad(b, colWidth)).join('  ')}`);
  lines.push(`${'-'.repeat(caseWidth)}  ${bindings.map(() => '-'.repeat(colWidth)).join('  ')}`);
  for (const [kase, row] of cells) {
    lines.push(
      `${pad(kase, caseWidth)}  ${bindings.map((b) => pad(row.get(b) ?? '-', colWidth)).join('  ')}`,
    );
  }
  const totals = bindings.map((b) => {
    let passed = 0;
    let total = 0;
    let skipped = 0;
    for (const row of cells.values()) {
      const s = row.get(b);
      if (s === undefined) continue;
      if (s === 'skip') {
        skipped += 1;
        continue;
      }
      total += 1;
      if (s === 'ok') passed += 1;
    }
    return { b, passed, total, skipped };
  });
  lines.push(`${'-'.repeat(caseWidth)}  ${bindings.map(() => '-'.repeat(colWidth)).join('  ')}`);
  lines.push(
    `${pad('passed/total', caseWidth)}  ${totals.map((t) => pad(`${t.passed}/${t.total}`, colWidth)).join('  ')}`,
  );
  const all = totals.reduce((a, t) => ({ p: a.p + t.passed, t: a.t + t.total, s: a.s + t.skipped }), {
    p: 0,
    t: 0,
    s: 0,
  });
  lines.push(`all bindings: ${all.p}/${all.t} passed${all.s ? `, ${all.s} skipped` : ''}`);
  for (const n of notes) lines.push(n);
  for (const { binding, reason, cases } of skips.values()) {
    const which = cases.length === cells.size ? 'all cases' : cases.join(', ');
    lines.push(`skip ${binding} (${which}): ${reason}`);
  }
  lines.push('');
  yield lines.join('\n');
}
