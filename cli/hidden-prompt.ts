// Reads one line from a terminal without echoing it: the join token stays out
// of the screen, the scrollback and the shell history.
import type { Writable } from 'node:stream';

type TtyInput = NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (raw: boolean) => unknown };

export class PromptCancelled extends Error {}

export function readHidden(prompt: string, input: TtyInput = process.stdin, output: Writable = process.stderr): Promise<string> {
  return new Promise((resolve, reject) => {
    // echo off before the prompt shows, so nothing typed after it is echoed
    input.setRawMode?.(true);
    output.write(prompt);
    input.resume();
    let value = '';
    const finish = (err?: Error): void => {
      input.off('data', onData);
      input.setRawMode?.(false);
      input.pause();
      output.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: Buffer | string): void => {
      for (const ch of String(chunk)) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return finish();
        if (ch === '\u0003') return finish(new PromptCancelled('cancelled at the prompt (Ctrl-C)'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else if (ch >= ' ') value += ch;
      }
    };
    input.on('data', onData);
  });
}

export async function readAll(input: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of input) text += String(chunk);
  return text;
}
