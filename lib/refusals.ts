// A refusal of chart values: a value path and a message, both with {name}
// placeholders ({name:q} quotes the value). The TypeScript checks fill them in;
// scripts/generators/chart-refusals.ts writes each as a named template the
// chart's _validate.tpl includes with the same names, so a message exists once.
export type Refusal = { readonly path: string; readonly message: string };
export type RefusalArgs = Record<string, string | number>;

const PLACEHOLDER = /\{(\w+)(:q)?\}/g;

/** The placeholders of a refusal, in order of appearance (path first). */
export function placeholders(text: string): { name: string; quoted: boolean }[] {
  return [...text.matchAll(PLACEHOLDER)].map((m) => ({ name: m[1]!, quoted: m[2] !== undefined }));
}

/** A refusal with its placeholders filled in. */
export function refuse(r: Refusal, args: RefusalArgs = {}): { path: string; message: string } {
  const fill = (text: string) =>
    text.replace(PLACEHOLDER, (_, name: string, q: string | undefined) => {
      const v = args[name];
      if (v === undefined) throw new Error(`refusal "${text}" needs a value for {${name}}; pass it in the arguments`);
      return q ? JSON.stringify(String(v)) : String(v);
    });
  return { path: fill(r.path), message: fill(r.message) };
}
