// One node: its kernel (highlighted), the diff against its parent's kernel,
// compile errors and static-check findings, the verification report (worst
// error, on which input) and the benchmark beside the baselines and the floor.
import hljs from 'highlight.js/lib/core';
import cpp from 'highlight.js/lib/languages/cpp';
import { diffLines } from 'diff';
import { el, fmt } from './api.js';

hljs.registerLanguage('cpp', cpp);

function code(text) {
  const c = el('code', { class: 'hljs language-cpp' });
  c.innerHTML = hljs.highlight(text, { language: 'cpp' }).value;  // hljs escapes the text
  return el('pre', { class: 'source', 'data-testid': 'source' }, c);
}

function diffView(before, after) {
  if (before === null || before === undefined)
    return el('p', { class: 'muted' }, 'no parent kernel (a child of the stock root): nothing to diff');
  const pre = el('pre', { class: 'diff', 'data-testid': 'diff' });
  const parts = diffLines(before, after);
  if (parts.every((p) => !p.added && !p.removed)) return el('p', { class: 'muted', 'data-testid': 'diff' }, 'same source as the parent');
  parts.forEach((part, i) => {
    const cls = part.added ? 'add' : part.removed ? 'del' : 'ctx';
    const mark = part.added ? '+' : part.removed ? '-' : ' ';
    let lines = part.value.replace(/\n$/, '').split('\n');
    // Unchanged runs keep 3 lines of context on each side that touches a change.
    if (cls === 'ctx' && lines.length > 8) {
      const head = i > 0 ? lines.slice(0, 3) : [], tail = i < parts.length - 1 ? lines.slice(-3) : [];
      const hidden = lines.length - head.length - tail.length;
      head.forEach((l) => pre.append(el('span', { class: cls }, `  ${l}\n`)));
      pre.append(el('span', { class: 'skip' }, `⋯ ${hidden} unchanged lines\n`));
      lines = tail;
    }
    for (const line of lines) pre.append(el('span', { class: cls }, `${mark} ${line}\n`));
  });
  return pre;
}

function kv(rows) {
  return el('table', { class: 'kv' }, rows.filter(Boolean).map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v))));
}

function evaluationView(ev) {
  if (!ev) return el('p', { class: 'muted' }, 'no evaluation record');
  const out = [];
  const comp = ev.compile || {};
  if (comp.ok === false || (comp.log && comp.log.trim()))
    out.push(el('h4', {}, comp.ok === false ? 'compile error' : 'compiler output'),
      el('pre', { class: 'log', 'data-testid': 'compile-log' }, comp.log || '(no log)'));
  if ((ev.static || []).length)
    out.push(el('h4', {}, 'static check'), el('ul', {}, ev.static.map((v) =>
      el('li', {}, typeof v === 'string' ? v : `${v.rule || ''} line ${v.line ?? '?'}: ${v.message || JSON.stringify(v)}`))));
  const ver = ev.verify;
  if (ver)
    out.push(el('h4', {}, 'verification'), kv([
      ['cases', `${ver.cases} (skipped ${ver.skipped ?? 0})`],
      ['worst abs error', ver.worst_abs],
      ['worst rel error', ver.worst_rel],
      ['tolerance there', ver.worst_tol],
      ['on input', ver.worst_case],
      ev.detail ? ['detail', ev.detail] : null,
    ]));
  else if (ev.detail)
    out.push(el('h4', {}, 'detail'), el('pre', { class: 'log' }, ev.detail));
  const b = ev.bench, base = ev.baseline || {};
  if (b) {
    const floor = b.bytes && b.ceiling_bytes_per_s ? (1e6 * b.bytes) / b.ceiling_bytes_per_s : null;
    out.push(el('h4', {}, 'benchmark'), kv([
      ['candidate (median)', `${fmt.us(b.candidate_us?.median)} ± ${fmt.us(b.candidate_us?.spread)}`],
      ['stock eager (median)', `${fmt.us(b.eager_us?.median)} ± ${fmt.us(b.eager_us?.spread)}`],
      ['torch.compile', fmt.us(base.compile_us)],
      ['captured in the model', fmt.us(base.captured_us)],
      ['bandwidth floor', floor === null ? '–' : `${fmt.us(floor)} (${b.bytes} bytes)`],
      ['speedup over eager', fmt.x(b.speedup_eager)],
      ['% of floor', `${fmt.pct(b.floor_pct)} (stock: ${fmt.pct(b.eager_floor_pct)})`],
      ['timed on', `${b.case || ''}, ${b.timing || ''}`],
    ]));
  }
  return el('div', { 'data-testid': 'evaluation' }, out);
}

export function renderNode(root, n) {
  root.hidden = false;
  root.replaceChildren();
  root.append(el('h3', { 'data-testid': 'node-title' },
    `#${n.id} ${n.steps?.what || n.kind || ''}`, ' ',
    el('span', { class: `pill status-${n.status}` }, n.status)));
  if (n.id === 0) { root.append(el('p', {}, n.note)); return; }
  root.append(kv([
    ['file', n.file],
    ['parent', `#${n.parent}${n.parent_file ? ` (${n.parent_file})` : ''}`],
    ['iteration', n.iteration + 1],
    ['speedup', fmt.x(n.speedup)],
    ['reason', n.reason],
  ]));
  root.append(evaluationView(n.evaluation));
  const tabs = el('div', { class: 'subtabs' });
  const body = el('div');
  const show = (which) => {
    for (const b of tabs.children) b.classList.toggle('active', b.dataset.view === which);
    body.replaceChildren(which === 'diff' ? diffView(n.parent_source, n.source || '')
      : n.source ? code(n.source) : el('p', { class: 'muted' }, 'source not in the store'));
  };
  tabs.append(el('button', { 'data-view': 'source', onclick: () => show('source') }, 'source'),
    el('button', { 'data-view': 'diff', onclick: () => show('diff') }, 'diff vs parent'));
  root.append(tabs, body);
  show('source');
}
