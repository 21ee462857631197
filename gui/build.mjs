// Bundles src/main.js (and the CSS it imports) into dist/, which is committed:
// `forge serve` serves dist/ as is, so a machine without npm still has the GUI.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';

rmSync('dist', { recursive: true, force: true });
mkdirSync('dist', { recursive: true });
await build({
  entryPoints: ['src/main.js'],
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  outfile: 'dist/app.js',
  legalComments: 'linked',
  logLevel: 'warning',
});
copyFileSync('index.html', 'dist/index.html');
