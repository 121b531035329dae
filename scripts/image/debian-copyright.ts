// The licenses a Debian package's copyright file names, when it is written in
// Debian's machine-readable format (DEP-5,
// https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/). Many
// packages (glibc's, GCC's, base-files') still use free text: for those the
// answer is "not stated", never a guess.

const FORMAT = /^Format:\s*https?:\/\/www\.debian\.org\/doc\/packaging-manuals\/copyright-format\/1\.0\/?\s*$/m;

/** The License short names of the Files paragraphs, in order of first use; undefined when the file is not machine-readable. */
export function dep5Licenses(copyright: string): string[] | undefined {
  const paragraphs = copyright.split(/\n[ \t]*\n/);
  if (!FORMAT.test(paragraphs[0] ?? '')) return undefined;
  const names: string[] = [];
  for (const p of paragraphs.slice(1)) {
    if (!/^Files:/m.test(p)) continue;
    // a field's first line holds the short name (or an expression of them: "GPL-2+ or Artistic"); continuation lines start with a space
    const name = /^License:[ \t]*(\S.*?)\s*$/m.exec(p)?.[1];
    if (name && !names.includes(name)) names.push(name);
  }
  return names.length > 0 ? names : undefined;
}
