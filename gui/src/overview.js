// Models and targets: time share, best speedup over eager and torch.compile,
// percent of the bandwidth floor, and what the search tried.
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
  el('td', {}, Object.entries(t.outcomes || {}).map(([k, n]) =>
    el('span', { class: `pill status-${k}` }, `${k} ${n}`)))));
  root.append(el('table', { class: 'targets' }, el('thead', {}, head), el('tbody', {}, rows)));
  if ((data.notes || []).length)
    root.append(el('ul', { class: 'notes' }, data.notes.map((n) => el('li', {}, n))));
}
