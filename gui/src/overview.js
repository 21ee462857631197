// Models and targets: time share, best speedup over eager and torch.compile,
// percent of the bandwidth floor, and what the search tried; a target the
// search did not take says why, and every other captured op is listed, folded,
// with the reason it is not a target (the report's not_selected).
import { el, fmt } from './api.js';

export function renderOverview(root, data, selected, onSelect) {
  root.replaceChildren();
  const models = Object.entries(data.models || {});
  if (models.length)
    root.append(el('div', { class: 'models' }, models.map(([name, m]) =>
      el('span', { class: `model ${m.status === 'ok' ? 'ok' : 'bad'}` },
        `${name}: ${m.status || 'not built'}${m.reason ? ` (${m.reason})` : ''}`))));
  const targets = data.targets || [];
  const ids = new Set(targets.map((t) => t.id));
  // Journals without a captured target (e.g. an older capture) still have trees.
  const orphans = (data.journals || []).filter((j) => !ids.has(j)).map((id) => ({ id }));
  const head = el('tr', {}, ['target', 'signature', 'share', 'time', '×eager', '×compile',
    '% floor', 'iterations', 'outcomes'].map((h) => el('th', {}, h)));
  const rows = [...targets, ...orphans].map((t) => el('tr', {
    class: t.id === selected ? 'selected' : '',
    'data-target': t.id,
    onclick: () => onSelect(t.id),
  },
  el('td', { class: 'id' }, t.id),
  el('td', { class: 'sig', title: t.signature || '' }, t.signature || ''),
  el('td', {}, t.share === undefined ? '–' : fmt.pct(100 * t.share)),
  el('td', {}, t.time_us === undefined ? '–' : fmt.us(t.time_us)),
  el('td', { class: 'num' }, fmt.x(t.best_speedup_eager)),
  el('td', { class: 'num' }, fmt.x(t.best_speedup_compile)),
  el('td', { class: 'num' }, fmt.pct(t.floor_pct)),
  el('td', { class: 'num' }, t.iterations ?? '–'),
  el('td', {}, t.selection && t.selection !== 'selected'
    ? notSearched(t)
    : Object.entries(t.outcomes || {}).map(([k, n]) =>
      el('span', { class: `pill status-${k}` }, `${k} ${n}`)))));
  root.append(el('table', { class: 'targets' }, el('thead', {}, head), el('tbody', {}, rows)));
  renderNotSelected(root, data.not_selected || []);
  if ((data.notes || []).length)
    root.append(el('ul', { class: 'notes' }, data.notes.map((n) => el('li', {}, n))));
}

// A selected target the search did not take: its reason and why.
function notSearched(t) {
  return el('span', { class: 'why', 'data-selection': t.selection },
    el('span', { class: 'pill reason' }, `not searched: ${t.selection}`), ' ', t.why || '');
}

// The captured ops that are no targets, folded: counts by reason in the
// summary, one row per op signature with its reason and why when opened.
function renderNotSelected(root, ops) {
  if (!ops.length) return;
  const counts = {};
  for (const t of ops) counts[t.selection] = (counts[t.selection] || 0) + 1;
  const summary = Object.entries(counts).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${n} ${k}`).join(', ');
  const head = el('tr', {}, ['op', 'signature', 'share', 'time', 'calls', 'reason', 'why'].map((h) => el('th', {}, h)));
  const rows = ops.map((t) => el('tr', { 'data-op': t.id, 'data-selection': t.selection },
    el('td', { class: 'id' }, t.id),
    el('td', { class: 'sig', title: t.signature || '' }, t.signature || ''),
    el('td', {}, t.share === undefined ? '–' : fmt.pct(100 * t.share)),
    el('td', {}, t.time_us === undefined ? '–' : fmt.us(t.time_us)),
    el('td', { class: 'num' }, t.calls ?? '–'),
    el('td', {}, el('span', { class: 'pill reason' }, t.selection)),
    el('td', { class: 'why' }, t.why || '')));
  root.append(el('details', { class: 'not-selected', 'data-testid': 'not-selected' },
    el('summary', {}, `${ops.length} other captured op signatures are not targets: ${summary}`),
    el('table', { class: 'ops' }, el('thead', {}, head), el('tbody', {}, rows))));
}
