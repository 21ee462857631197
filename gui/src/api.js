// The JSON API (docs/GUI.md). Errors come back as {"error": "..."} with a status.
export async function api(path, params = {}) {
  const q = new URLSearchParams(params).toString();
  const res = await fetch(`/api/${path}${q ? `?${q}` : ''}`, { credentials: 'same-origin' });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
}

// Small DOM helper: el('td', {class: 'x'}, 'text', child...). Text is always
// set as text, never parsed as HTML.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export const fmt = {
  x: (v) => (v === null || v === undefined ? '–' : `${Number(v).toFixed(2)}×`),
  pct: (v) => (v === null || v === undefined ? '–' : `${Number(v).toFixed(1)}%`),
  us: (v) => (v === null || v === undefined ? '–' : `${Number(v).toFixed(1)} µs`),
};
