// A generated block inside a hand-written Markdown file: the text between two comment markers.

/** Replaces what lies between `begin` and `end` in `text` (a file at `path`) with `table`. */
export function replaceBetween(text: string, path: string, begin: string, end: string, table: string): string {
  const b = text.indexOf(begin);
  const e = text.indexOf(end, b);
  if (b < 0 || e < b) throw new Error(`${path} lacks the generated-table markers ${begin} … ${end}: put them back where the table belongs and run npm run generate again`);
  return `${text.slice(0, b + begin.length)}\n\n${table}\n\n${text.slice(e)}`;
}
