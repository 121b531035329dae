/** A command given the wrong options or files: its message says which, and the exit code is 2. */
export class UsageError extends Error {}
