/**
 * The direction of imports in src/ (`npm run depcheck`, run by .ci/run). The layers, top
 * to bottom (docs/architecture.md draws them):
 *
 *   cli.ts                  the process: exit codes, signal handlers
 *   program.ts              argv -> a command (commander)
 *   commands/               argv and options in, text out: thin adapters to...
 *   run/                    ...the run engine: the lock, the fire plan, the pass, the skip
 *   runner/  schedule/  metrics/  kube/  lock/  config/ (loading)
 *   runner/handlers/        one attempt of one item (exec, module)
 *   ledger/                 the Ledger interface and open.ts: the store (run lock + ledger), the one door to...
 *   ledger/sqlite/ ledger/postgres/   ...the adapters (all SQL, and each one's kind of run lock)
 *   errors.ts redact.ts globs.ts log.ts config/types.ts   leaves: import nothing above them
 *
 * Each rule below forbids an arrow that would point back up. Type-only imports count
 * (tsPreCompilationDeps): a type is a dependency a reader must follow too.
 * `warn` marks a rule the code breaks today in a file being rewritten elsewhere; its
 * comment names the file. Once fixed, make it an `error`.
 */

/** The modules allowed to know about everything below: the edge of the program. */
const TOP = '^src/(cli|program)[.]ts$|^src/(commands|run)/';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle has no bottom to read from; move the shared part into a module both import.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'only-cli-imports-program',
      severity: 'error',
      comment: 'program.ts wires argv to commands; nothing below it may reach back up. code-cache.ts loads it for cli.ts (in the bundle).',
      from: { pathNot: '^src/(cli|code-cache)[.]ts$' },
      to: { path: '^src/(cli|program)[.]ts$' },
    },
    {
      name: 'commands-are-the-edge',
      severity: 'error',
      comment: 'commands/ turn argv into calls downwards; only cli.ts and program.ts import them.',
      from: { pathNot: '^src/(cli|program)[.]ts$|^src/commands/' },
      to: { path: '^src/commands/' },
    },
    {
      name: 'commands-go-through-the-run-layer',
      severity: 'error',
      comment:
        'A command turns argv into a call to run/ (or a read of the ledger through ledger/open.ts) and prints the answer; ' +
        'the pass, the locks and the Lease are driven by run/, so that what a run does is in one place.',
      from: { path: '^src/commands/' },
      to: { path: '^src/(runner|lock)/|^src/kube/lease/' },
    },
    {
      name: 'run-engine-is-above-the-pass',
      severity: 'error',
      comment: 'run/ (the run engine) drives runner/, ledger/, lock/ and the rest; none of them may import it.',
      from: { pathNot: TOP },
      to: { path: '^src/run/' },
    },
    {
      name: 'config-loading-is-for-the-edge',
      severity: 'error',
      comment:
        'Loading and validating config (yaml, zod, the schedule checks) happens once at the edge; ' +
        'below it a module takes the resolved Config (config/types.ts) as a parameter. ' +
        'ledger adapters in particular never import config/load.ts.',
      from: { pathNot: `${TOP}|^src/config/` },
      to: { path: '^src/config/', pathNot: '^src/config/types[.]ts$' },
    },
    {
      name: 'config-does-not-reach-into-runner',
      severity: 'error',
      comment: 'Config loading checks paths but never runs a pass; what it shares with the scan (the exclude globs) is the leaf globs.ts.',
      from: { path: '^src/config/' },
      to: { path: '^src/(runner|lock|kube|metrics)/' },
    },
    {
      name: 'ledger-is-below-the-pass',
      severity: 'error',
      comment: 'The ledger stores state; it never calls the runner, the lock, the schedule, metrics or Kubernetes.',
      from: { path: '^src/ledger/' },
      to: { path: '^src/(runner|lock|kube|metrics|schedule|commands|run)/|^src/(cli|program|log)[.]ts$' },
    },
    {
      name: 'adapters-do-not-import-each-other',
      severity: 'error',
      comment: 'SQLite and PostgreSQL share TypeScript through ledger/ (rows, settle-steps, ...), never through each other.',
      from: { path: '^src/ledger/(sqlite|postgres)/' },
      to: { path: '^src/ledger/(sqlite|postgres)/', pathNot: '^src/ledger/$1/' },
    },
    {
      name: 'adapters-only-through-the-seam',
      severity: 'error',
      comment:
        'Outside ledger/, the adapters are reached through ledger/open.ts only: openStore gives the run lock and ' +
        'the ledger, so nothing above asks which kind of store it is.',
      from: { pathNot: '^src/ledger/' },
      to: { path: '^src/ledger/(sqlite|postgres)/' },
    },
    {
      name: 'lock-is-below-the-pass',
      severity: 'error',
      comment: 'lock/ (the heartbeat that backs the run lock) is driven by the run engine; it knows nothing of the pass, metrics or schedules.',
      from: { path: '^src/lock/' },
      to: { path: '^src/(runner|kube|metrics|schedule)/' },
    },
    {
      name: 'kube-does-not-import-lock',
      severity: 'error',
      comment: 'The Lease lock lives whole in kube/lease/ (state, API calls, the run\'s use of it); the run lock is the store\'s (ledger/open.ts), its heartbeat in lock/.',
      from: { path: '^src/kube/' },
      to: { path: '^src/lock/' },
    },
    {
      name: 'runner-takes-its-sinks-as-parameters',
      severity: 'error',
      comment: 'The pass reports through callbacks and the Ledger interface; metrics, Kubernetes, locks and schedules are wired above it.',
      from: { path: '^src/runner/' },
      to: { path: '^src/(metrics|kube|lock|schedule)/' },
    },
    {
      name: 'handlers-do-not-touch-state',
      severity: 'error',
      comment: 'A handler runs one attempt; recording its outcome is the pass\'s job (runner/), not the handler\'s.',
      from: { path: '^src/runner/handlers/' },
      to: { path: '^src/(ledger|lock|metrics|kube|schedule)/' },
    },
    {
      name: 'schedule-is-pure',
      severity: 'error',
      comment: 'Schedule maths and the daemon loop take their clock and their ledger as parameters.',
      from: { path: '^src/schedule/' },
      to: { path: '^src/(runner|lock|kube|metrics)/|^src/ledger/(?!types[.]ts$)' },
    },
    {
      name: 'leaves-stay-leaves',
      severity: 'error',
      comment: 'errors.ts, redact.ts, globs.ts, terminal-safe.ts, log-sink.ts and config/types.ts import nothing of ours but leaves; log.ts only the config types, terminal-safe.ts and log-sink.ts.',
      from: { path: '^src/(errors|redact|globs|terminal-safe|log-sink)[.]ts$|^src/config/types[.]ts$|^src/log[.]ts$' },
      to: { path: '^src/', pathNot: '^src/(config/types|terminal-safe|log-sink)[.]ts$' },
    },
    {
      name: 'no-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing breaks at run time.',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'no-undeclared-packages',
      severity: 'error',
      comment: 'A package used by src/ must be in package.json, else a clean install breaks.',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'] },
    },
    {
      name: 'no-dev-packages-at-run-time',
      severity: 'error',
      comment:
        'devDependencies are not installed with the package; @kubernetes/client-node is the exception: ' +
        'scripts/bundle.mjs bundles it into a chunk.',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'], pathNot: '(^|/)node_modules/@kubernetes/client-node/' },
    },
  ],
  options: {
    // Unanchored: a worktree whose node_modules is a symlink resolves packages outside it.
    doNotFollow: { path: '(^|/)node_modules/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
