// The git history of accepted kernels (the forge/kernels ref): one commit per
// improvement; clicking one shows its diff.
import { api, el } from './api.js';

export function renderHistory(root, data) {
  root.replaceChildren(el('h2', {}, `History (${data.ref})`));
  if (!data.commits.length) { root.append(el('p', { class: 'muted' }, 'no accepted kernel committed yet')); return; }
  const diff = el('pre', { class: 'diff', hidden: true });
  const list = el('ul', { class: 'commits' }, data.commits.map((c) => el('li', {
    'data-commit': c.commit,
    onclick: async () => {
      const d = await api('history/diff', { rev: c.commit });
      diff.hidden = false;
      diff.replaceChildren(...d.diff.split('\n').map((line) =>
        el('span', { class: line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : 'ctx' }, `${line}\n`)));
    },
  }, el('code', {}, c.commit.slice(0, 10)), ' ', c.subject,
  c.fields.proposer ? el('span', { class: 'muted' }, ` (${c.fields.proposer})`) : null)));
  root.append(list, diff);
}
