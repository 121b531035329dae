// A file the kubelet projects from a ConfigMap the agent writes. The kubelet
// replaces it when the ConfigMap changes, so it is read again every few seconds;
// the caller hears of each new text and of each failed read (after which the
// same text counts as new again).
import { readFile } from 'node:fs/promises';

export type MountedFileRead = { text: string } | { error: NodeJS.ErrnoException };

/** Reads `path` now and every `intervalMs`; returns stop(). */
export async function followMountedFile(path: string, onRead: (r: MountedFileRead) => void, intervalMs = 5_000): Promise<() => void> {
  let last: string | undefined;
  const read = async (): Promise<void> => {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      last = undefined;
      return onRead({ error: err as NodeJS.ErrnoException });
    }
    if (text === last) return;
    last = text;
    onRead({ text });
  };
  await read();
  const timer = setInterval(() => void read(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
