// A target's search tree: d3-hierarchy's tidy tree layout drawn as SVG; each
// node coloured by its outcome (failures by kind), labelled with its speedup.
import { stratify, tree as tidyTree } from 'd3-hierarchy';
import { el } from './api.js';

const SVG = 'http://www.w3.org/2000/svg';
const svg = (tag, attrs = {}) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
};

// Failure labels short enough for siblings 64 px apart.
const SHORT = { compile_error: 'compile ✗', static_reject: 'static ✗', wrong_result: 'wrong ✗', crash: 'crash ✗', timeout: 'timeout ✗' };

export const STATUSES = ['ok', 'not_faster', 'compile_error', 'static_reject', 'wrong_result', 'crash', 'timeout'];

export function renderLegend(root) {
  root.replaceChildren(...STATUSES.map((s) => el('span', { class: `pill status-${s}` }, s.replace('_', ' '))));
}

export function renderTree(root, data, selectedNode, onSelect) {
  root.replaceChildren();
  const nodes = data.nodes || [];
  const h = stratify().id((d) => String(d.id)).parentId((d) => (d.parent === null ? null : String(d.parent)))(nodes);
  const dx = 64, dy = 90;
  tidyTree().nodeSize([dx, dy])(h);
  let x0 = Infinity, x1 = -Infinity, y1 = 0;
  h.each((d) => { x0 = Math.min(x0, d.x); x1 = Math.max(x1, d.x); y1 = Math.max(y1, d.y); });
  const width = x1 - x0 + 2 * dx, height = y1 + 70;
  const s = svg('svg', { viewBox: `${x0 - dx} -20 ${width} ${height}`, width, height, class: 'tree' });
  for (const link of h.links())
    s.append(svg('path', {
      class: 'link',
      d: `M${link.source.x},${link.source.y}C${link.source.x},${(link.source.y + link.target.y) / 2} ${link.target.x},${(link.source.y + link.target.y) / 2} ${link.target.x},${link.target.y}`,
    }));
  for (const d of h.descendants()) {
    const n = d.data;
    const g = svg('g', {
      class: `node status-${n.status}${n.id === selectedNode ? ' selected' : ''}${n.kind === 'llm' ? ' llm' : ''}`,
      transform: `translate(${d.x},${d.y})`,
      'data-node': n.id,
      'data-status': n.status,
    });
    g.append(svg('circle', { r: n.id === 0 ? 11 : 9 }));
    const label = svg('text', { dy: 24, 'text-anchor': 'middle' });
    label.textContent = n.id === 0 ? 'stock' : (n.speedup ? `${n.speedup.toFixed(2)}×` : SHORT[n.status] || n.status);
    g.append(label);
    const title = svg('title');
    title.textContent = `#${n.id} ${n.what || n.kind}\n${n.status}${n.reason ? `: ${n.reason}` : ''}`;
    g.append(title);
    g.addEventListener('click', () => onSelect(n.id));
    s.append(g);
  }
  root.append(s);
}
