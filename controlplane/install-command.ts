// The install commands the dashboard shows (Connect your cluster, New install
// command): one with the token in it, and a hidden-prompt variant that keeps
// the token out of the screen, the scrollback and the shell history.
//
// The hidden prompt must work whatever shell the user pastes it into (bash,
// zsh, sh/dash): `read -rsp` is bash only (in zsh -p reads from a coprocess,
// dash has no -s). So the prompt runs in `sh -c '…'`, whose script is plain
// POSIX: `stty -echo` when stdin is a terminal (traps restore echo on Ctrl-C or
// any exit), `read -r`, `stty echo`, then helm. The outer shell only has to
// parse one single-quoted word, which every Bourne-style shell does alike. Flags
// appended to the command (`-f values.yaml`, `--set …`) reach helm as "$@", and
// the token never becomes a variable of the user's shell.

export type InstallCommands = { installCommand: string; installCommandPrompt: string };

/**
 * The helm command without the token. Connect your cluster: `helm install`. New
 * install command (`existing`): `helm upgrade --install` on a cluster that usually
 * runs the release already, whose values the user chose (DNS peers, storage, extra
 * domains, CA bundle, observability): helm upgrade with a `--set` and no reuse flag
 * resets them all to the chart's defaults, which can take the cluster offline or
 * fail on immutable PVC fields. `--reset-then-reuse-values` (Helm ≥ 3.14) keeps the
 * values the user set and takes the defaults of the chart version named here, which
 * is what an upgrade to that version means; `--reuse-values` would also carry the
 * installed chart's defaults forward (a changed default, e.g. the CRD hook's image
 * tag, would stay old). On a cluster without the release helm installs and ignores
 * the flag; a Helm older than 3.14 stops at the unknown flag before changing anything.
 */
export function helmCommand(o: { chartRef: string; chartVersion: string; existing: boolean }): string {
  const verb = o.existing ? 'upgrade --install' : 'install';
  return `helm ${verb} rlmesh ${o.chartRef} --version ${o.chartVersion} -n rlmesh-system --create-namespace${o.existing ? ' --reset-then-reuse-values' : ''}`;
}

/** `helm` is the command without the token, e.g. `helm install rlmesh oci://… --version 1.2.3 -n rlmesh-system --create-namespace`. */
export function installCommands(helm: string, token: string): InstallCommands {
  if (helm.includes("'")) throw new Error('the helm command must not contain a single quote (it is embedded in sh -c \'…\')');
  const script = [
    'if [ -t 0 ]; then trap "stty echo" EXIT; trap "exit 130" INT TERM HUP; stty -echo; fi',
    'printf "rlmesh join token: " >&2',
    'read -r t',
    'if [ -t 0 ]; then stty echo; fi',
    'echo >&2',
    '[ -n "$t" ] || { echo "no join token entered: paste the token of the install command (rlm_jt_...) at the prompt" >&2; exit 1; }',
    `${helm} --set joinToken="$t" "$@"`,
  ].join('; ');
  return {
    installCommand: `${helm} --set joinToken=${token}`,
    installCommandPrompt: `sh -c '${script}' rlmesh-install`,
  };
}
