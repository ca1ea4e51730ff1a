"""A length stream: an encoder over batches of random lengths and batch sizes, eager vs squall.jit
vs torch.compile, in one process: total wall time (compiles included) and compiles.

Run: python bench/length_stream.py [--batches 40] [--rounds 3] [--no-torch-compile] [--dim 32] [--calls]
     [--only CONTENDER ...]  (e.g. --only squall "squall, torch only": those and eager) [--fused-warm]
(--calls: each contender's first pass call by call on the calling thread's CPU time: its
compiles, the calls rented eagerly (squall.runtime.ski_rental) and its hits, then per batch
size its warm pass against eager's; --fused-warm: squall's warm pass once its background upgrade,
and the compilations the fused regions start for calls their guards refuse, are done: the fused
plan's speed at each batch size)

The stream: DistilBERT (random weights, --dim wide, 2 layers) over --batches batches, each of a
batch size drawn from 1/4/8 and a length from 8-128. Each round builds every contender afresh
(a new `squall.jit`, `torch._dynamo.reset()`) and runs the whole stream through each in turn,
so the load on the machine falls on all alike; the table has each contender's best round and
its ratio to eager's, in wall time and in the calling thread's CPU time (steadier on a loaded
machine; it leaves out what background threads take), then the same stream again on the warm
contenders (per-call speed; a batch of 1 whose rental ends there compiles in it).

Contenders:
- squall: `squall.jit(model)`, automatic dynamic (the default): a background upgrade is queued
  once its entry is hot (upgrade_worker.HOT_S), and a batch of 1 beside the symbolic entry runs eagerly
  until its calls took as much CPU time as a compile (squall.runtime.ski_rental);
- squall, upgrade at 1st call: each entry's upgrade queued after its first call (the policy
  before HOT_S);
- squall, batch of 1 compiled: a batch of 1 compiled at its first call (the policy before);
- squall, length only: a changed length making only that dimension symbolic (the policy before
  the batch size went with it: one more compile when the batch changes), a batch of 1 compiled;
- squall, torch only: `executors=["torch"]`, no background fusion compiles beside the stream;
- squall(dynamic=True): every size of 2 or more symbolic from the first call (no static
  compile first), as a user who knows the lengths vary would set it (`[tool.squall] dynamic`);
  its batches of 1 rent as the default's do (or, where its trace never relied on the batch being
  2 or more, run its symbolic entry);
- squall(dynamic=True), 1st call eager: a what-if for the default policy, the first call run
  eagerly and the second compiled with every size symbolic;
- squall, remembered dims (rounds 2+): the default as a user's later run of the same code meets
  it (squall.runtime.dims_profile, `$SQUALL_REMEMBER_DYNAMIC`, on by default: what a jit of the
  model's forward learned is kept for the process and on disk): each round's jit starts with
  the dimensions the earlier rounds' jits learned, so from the second round on it compiles
  once, symbolic (its first round too, where an earlier run of this script left them in squall's
  cache folder). Its best round is never a first run: the default's row is. Every other
  contender runs with remembering off (`$SQUALL_REMEMBER_DYNAMIC=0`, set by this script), so
  each of its rounds is a first run;
- torch.compile(dynamic=True) and torch.compile() (Dynamo's automatic dynamic).

Measured (2 shared cores, one thread, ratios to eager; the machine was loaded, 16-20):
- 40 batches, best of 2, load 15.9: squall 3 compiles, 2.54x eager in all (0.53 s against
  0.21 s), warm 0.87x; length only 4 compiles, 3.41x; torch only 3 compiles, 1.88x, warm
  0.81x; torch.compile(dynamic=True) 93.7x (19.6 s), warm 1.00x; torch.compile() 48.8x, warm 0.81x.
- 400 batches, best of 2, load 17.8: squall 3 compiles, 1.58x in all, warm 0.76x; length
  only 4 compiles, 1.02x; torch only 3 compiles, 0.78x, warm 0.69x. With inductor installed
  the background upgrade (its symbolic regions compiled in a thread) competes with the stream
  for the interpreter; with the torch executor alone squall is under eager's total from a few
  hundred batches. Three compiles cost about 60 ms here, more than eager's 40-batch stream.
- After the compile-speed work (tracespeed), 40 batches, best of 3, paired with the commit
  before it in one sitting, load 8-11: squall 2.08x eager in all (before 3.00x), torch only
  1.81x (before 2.83x); the three compiles cost 46 ms of CPU time (before 53-59 ms), and the
  torch-only warm stream is 0.70-0.76x eager's, so the compiles pay for themselves after
  about 150-200 batches. A quiet machine runs everything about 3x faster; eager's 40 batches
  (about 43 ms quiet) still cost less than three compiles.
- Replayed decompositions and cheaper state reads (tracespeed2), paired with main in one sitting,
  load 7-10, CPU time: the three compiles 49-56 ms -> 44-51 ms; one trace of this model
  (`trace_program` alone, best of 15) 10.4-11.8 -> 9.1-9.4 ms static and
  13.5-14.3 -> 9.4-9.7 ms with symbolic sizes. Still well above the 10-15 ms the three
  compiles would have to cost to match eager's total.
- Upgrades queued once hot, batches of 1 eager until they paid for a compile (stream2), 40
  batches, best of 5, load 2.3: eager 0.041 s; squall 2 compiles, 0.065 s (1.57x; on main before,
  load 1.7: 3 compiles, 0.084 s, 2.06x), warm 0.89x (its batches of 1 still eager); upgrade at
  the 1st call 0.091 s (2.21x); a batch of 1 compiled 3 compiles, 0.081 s (1.97x), warm 0.74x;
  torch only 2 compiles, 0.078 s. Timed call by call in one process (load 3-5), the 15 batches
  of 1 take 0.85 ms each eagerly against 0.42 ms compiled, and the compile they skip 13-15 ms:
  7 ms saved. Each of the 2 compiles left costs 13-15 ms; the first (static, at the first
  batch) is the one a stream wastes: running the first call eagerly and compiling the second
  symbolically would save it (measured by hand: 1 compile, 0.083 s against 0.101 s, load 3).
- Cheaper compiles (compilecost: replayed decompositions copied only when read, the call key's
  default device, the globals check, the planner's copies, signatures read once), main and the
  branch in alternate processes, load 10-12, so on the calling thread's CPU time (wall time at
  that load swings 2-3x between runs), torch only, best of 5: eager 43.8-45.8 ms; squall
  64-67 ms (1.46-1.49x) -> 60-63 ms (1.35-1.39x); its two compiles 23.7-24.6 -> 20.4-21.6 ms.
  A cheaper compile also ends the batch of 1's ski rental sooner (it rents until it spent one
  compile): some rounds compile it within the 40 batches (3 compiles).
- All of this session's merges, best of 3, load 1.5 (2026-11-26): eager 0.044 s; squall 2
  compiles, 0.063 s (1.43x), warm 1.08x (its batches of 1 eager); torch only 3 compiles, 0.073 s
  (1.66x), warm 0.76x; squall(dynamic=True) 2 compiles, 0.060 s (1.38x), warm 0.74x;
  torch.compile(dynamic=True) 4.61 s (105x), warm 0.73x; torch.compile() 2.99 s (68x).
  Skipping the static first compile (dynamic=True) saves less than it costs to trace every size
  symbolic: the total stays above eager's with either policy.
- dynamic=True rents its batches of 1 too (streampolicy), main and the branch in alternate
  processes, load 11-13, the calling thread's CPU time, best of 4: eager 50-54 ms; squall(dynamic=True)
  1.27-1.30x -> 1.09-1.14x (2 compiles, the second the batch of 1's, 29 ms -> 1 compile, 17 ms,
  and 15 rented calls, 15 ms); the default unchanged, 1.33-1.35x (2 compiles, 26-29 ms; 15 rented
  calls 14-15 ms; 23 hits 27 ms against eager's 36-40 ms for those batches). Call by call: a rented
  batch of 1 costs what eager's does (interleaved, 11.5-12.1 ms against 10.6-12.2 ms for 14), its
  first 0.4 ms more; a warm hit 0.68-0.8x eager's at batch 4 and 8, 0.55-0.6x at batch 1. Where
  the total goes: the hits save at most a third of eager's time for batches of 4 and 8 (about 9 ms
  quiet) and a rented batch of 1 saves nothing, so the total is at or under eager's only once
  the compiles take less than about 9 ms together: one compile of today's 12-14 ms (quiet) does not fit,
  whichever the policy (dynamic=True's one compile included); a batch of 1 served by the symbolic
  entry would save 4 ms more, still short. The background upgrade takes nothing from a 40-batch
  stream at a quiet load: its entries are not hot (50 ms of calls) before it ends.
  The default's 15 batches of 1 take about as much eager time (10-12 ms) as the compile their
  rental is measured against (11-14 ms), so it compiles them near the stream's end in some rounds
  and not in others (2 or 3 compiles, 1.4x or 1.7x). Each contender's stream now starts with a
  `gc.collect()`: a full collection of the last contender's garbage inside a compile made that
  compile, and so the rental's budget, look longer (without it, load 5-6: 2, 2, 3 compiles in
  three runs; with it: 3, 3, 3; squall(dynamic=True) 1.14-1.20x CPU with it, 1.29-1.46x without).
- All of the second 2026-11-26 session's merges (cheaper state reads and the collector paused
  while tracing, the rental under dynamic=True, compiled code kept on disk), best of 3, load 0.8:
  eager 0.043 s; squall 3 compiles, 0.069 s (1.60x; the batch of 1 compiled at the rental's end),
  warm 0.75x; torch only 1.52x; squall(dynamic=True) 2 compiles, 0.058 s (1.35x), warm 0.74x;
  squall with the batch of 1 compiled at once 1.45x. Not yet at eager's total.
- A batch of 1 served by the symbolic entry (stream5: a tensor argument's size symbol stands for
  1 or more until the trace relies on 2 or more; DistilBERT's trace never does for the batch),
  this branch and main (b6a96cc) alternating in one sitting (branch, main, branch), load 2.3-4.3,
  the calling thread's CPU time, best of 3: eager 44-47 ms; squall(dynamic=True) 0.99x and 0.96x
  (1 compile, 11 ms; 39 hits, no rental) against main's 1.29x (2 compiles, 12 rented); squall,
  torch only 1.12x and 1.14x (2 compiles) against 1.50x (3); the default 1.52x and 1.25x (2
  compiles; the background upgrade's thread is in its compiles' 24-27 ms) against 1.49x (3).
  The default's static first compile is what is left between it and dynamic=True: the what-if
  with the first call eager and every size symbolic at the second gave 1.20x and 0.98x (1
  compile). Making that the default changes what every fixed-shape program does at its first
  call (it would run eagerly and compile at the second): left as a measurement.
  Again after merging main (replayed submodules, 4f19b3c), branch then main, load 2.3-2.6, best
  of 3, wall and CPU time alike: squall(dynamic=True) 0.98x eager (1 compile) against 1.29x;
  the default 1.20x (2 compiles) against 1.52x (3); torch only 1.10x against 1.44x.
- A fast path for keyword tensors and remembered dimensions (stream6), main and the branch in
  alternate processes, load 5.7-10, the calling thread's CPU time, best of 3: eager 44-50 ms; the
  default unchanged within the noise (main 1.16x and 1.08x, the branch 1.27x and 1.27x; its 2
  compiles 21-25 ms either way: three more pairs of 20 compiles each gave bests of 10.7-12.6 ms a
  compile on both); the warm pass 0.72-0.75x eager on both (a hit now spends about 17 us before
  its program instead of 30 us, but only 21 of the 39 hits repeat the last call's entry: batches
  of 1 have one of their own). squall, remembered dims (rounds 2+): 0.99x and 1.04x, 1 compile
  (11-13 ms), and never a first run. Where the default's total goes: the 38 hits save about
  11 ms against eager's calls and the two compiles cost about 21 ms more than the two eager calls
  they replace, so the default reaches eager's total only at about 7 ms a compile; a trace alone
  takes 6-7 ms of today's 10-12 (bench/compile_phases.py), and its profile is flat (the program's
  own Python through the state views, 54 torch-language calls at about 60 us each; no function
  takes 4% of it in its own time).
- Cheaper compiles (compilecost3, 2026-11-26; bench/compile_phases.py has what changed: a few
  percent a compile), main (4df9abf) then the branch, eager, squall, torch only and
  squall(dynamic=True) only (the full set took over 10 minutes a run at this load, its inductor
  upgrades waited for), best of 3, load 6-10, CPU time: eager 51 / 49 ms; squall 2 compiles,
  1.22x / 1.29x (its compiles 28.3 / 28.9 ms); torch only 1.20x / 1.26x; squall(dynamic=True)
  1 compile, 1.08x / 1.04x (15-16 ms). No change the load lets one see. Where the default's total
  crosses eager's (the branch, best of 2, load 5-7): at 100 batches squall 0.75x wall, 0.86x CPU
  (2 compiles), torch only 0.85x / 0.88x, dynamic=True 0.83x / 0.74x; at 200 batches the default's
  background upgrades (inductor, 4 compiles in all) run beside the stream: squall 1.80x wall but
  1.02x CPU, torch only 0.77x / 0.85x, dynamic=True 1.17x / 0.99x (main at 200: squall 1.25x /
  0.91x, torch only 0.77x / 0.75x). So the default (and torch only) cross eager's total between
  40 and 100 batches; past a few hundred the upgrade's compiles in its thread decide the wall time.
- All of the third 2026-11-26 session's merges (4df9abf -> 215da32), the two trees alternating in
  one sitting (base, main, base, main; --no-torch-compile, best of 3, load 0.8-2.2), wall time:
  eager 48-53 ms; squall 1.46x / 1.49x (base) against 1.29x / 1.30x (main), 2 compiles; torch
  only 1.23x / 1.21x against 1.30x / 1.28x; squall(dynamic=True) 1.03x / 0.97x against 1.33x /
  1.06x (1 compile; a third main run gave 1.10x). The warm pass: torch only 0.63-0.64x (base)
  against 0.78x (main), which comes from whether the rented batches of 1 were compiled by then
  (ski rental, timed): a warm pass over batches of 4 and 8 only, one symbolic entry, takes
  0.66-0.74x eager on base and 0.71-0.75x on main, and bench/compile_phases.py (alternating) gave
  static compiles of 11.4-11.8 ms (base) and 11.0-11.9 ms (main). The default's 40-batch total
  stays above eager's.
- 2026-11-26 (fourth session, all its merges: 9cc72bb), --no-torch-compile, best of 3, load 1.6-2.5:
  eager 0.055 s; squall 1.30x (2 compiles), warm 0.67x; torch only 1.34x; squall(dynamic=True)
  0.99x (1 compile), warm 0.68x; remembered dims (rounds 2+) 0.92x (1 compile). The default's two
  compiles still cost more than the hits save; compilecost5 (not merged) found the torch-language
  dispatch's own checks cost about 1 us a call (0.15 ms a compile): a compile's trace time is in
  the ops' bodies (4.4 of 6.0 ms of dispatch) and the state views' reads.
- What the background upgrade cost the stream (quietupgrade, 2026-11-27), main (a81cdb2) and the
  branch alternating, fresh squall and inductor caches per run, --no-torch-compile, best of 3, the
  load set by other sessions: round 1 (load 2.3-2.4) eager 0.092 / 0.098 s; squall 1.19x / 1.21x
  (2 compiles); torch only 1.15x / 1.65x; upgrade at 1st call 2.23x, 4 compiles / 1.61x, 2
  compiles, warm 1.35x / 0.84x. Round 2 (load 5.4-5.9): squall 1.34x / 1.71x; torch only 1.54x /
  1.52x; upgrade at 1st call 2.43x, 5 compiles / 1.16x, 2 compiles; 1st call eager 5 / 1 compiles.
  At these loads the default's 40-batch total does not separate main from the branch (its upgrade
  is queued after 50 ms of calls and rarely lands inside the stream); what does is the compiles:
  on main an upgrade that landed planned its regions with the slice `x[:, :n]` printed, which read
  the length and guarded it (`s1 == 13`), so every other length failed the upgraded program's
  shape guard and compiled a variant in the user's thread (2-3 more compiles, 40-200 ms each at
  this load); on the branch the upgraded program serves every length (2 compiles, no guard failure;
  the default's warm pass 0.71x eager in both rounds, torch only's 0.73x). Probed call by call on main, an
  upgrade that lands mid-stream held the interpreter 44-72 ms of the stream's 170-290 ms of CPU
  (the judgement's key, 5 ms a program; planning with inductor, 8-10 ms; a symbolic region loaded
  through inductor, seconds the first time in a process: Dynamo's import). 200 batches, best of 2,
  --only squall "squall, torch only": main (load 1.4) squall 0.85x wall, 0.82x CPU, torch only
  1.10x; the branch (load 3.4) squall 1.49x wall, 0.85x CPU, torch only 0.85x: the upgrade's
  compiles in the worker ran beside this stream; at that load the wall time says little.
- 2026-11-27, end of the session, everything merged (fd5bad2), --no-torch-compile, best of 5, load
  0.7-1.6: eager 0.102 s; squall 1.14x (2 compiles; 1.43x at the session's start, a81cdb2's parent,
  load 0.8-1.7, best of 3, not alternating), warm 0.92x; torch only 1.05x; squall(dynamic=True)
  1.00x wall, 0.95x CPU (1 compile); remembered dims (rounds 2+) 0.86x. The default's total still
  above eager's.
- Where the default loses, call by call (streamgap, 2026-11-27, 964945a, load 1.1-4.7 set by other
  sessions, the calling thread's CPU time; scripts alternating contenders in one process, least of
  6 rounds per call). Eager's 40 calls 103 ms; the default 117 ms = 2 compiles 23.2 + 24.1 ms and 38
  hits 69 ms (eager's calls for those batches 98 ms: the hits run at 0.70x); torch only 2 compiles
  25.2 + 25.6 ms, hits within 1 ms of the default's. So the default's whole gap is its two compiles
  (47 ms in place of two eager calls of 5 ms) against what the hits save (29 ms); the background
  upgrade takes nothing from the first pass (both its entries still "cold", HOT_S not reached, in
  every round of these runs), and per new length a symbolic hit costs what a repeated one does
  (first and second call of each of 19-22 new shapes, alternating: sums within 5%). The default's own
  extra work in the user's thread is each compile's upgrade job (`Upgrades._upgrade_job`, 0.75 ms:
  `call_specs` copies the 37 small weights and the input, 0.45 ms) and the watch (0.03 ms): 1.5 ms
  a stream. The 1.14x against torch only's 1.05x of the session before is noise at these loads.
  What the symbolic recompile repeats from the static one: all of it. cProfile over 20 symbolic
  recompiles (the collector off): `trace_program` 76% of the compile, of which 87% is the model's
  own Python run through the state views and the torch-language calls; plan + codegen 14%; the
  module walk, wrapping checks, cache insert and compile record about 3% together (about 0.7 ms).
  bench/compile_phases.py (load 2.7-3.3): static 19.6-20.7 ms best (trace 13.6-14.3), dynamic=True
  21.4-22.7 (trace 14.7-15.6), default executors and torch only alike. Reusing the static compile's
  module walks, parameter proxies and guard text would save at most about 1 ms of a recompile's 22;
  only not running the model's Python again (deriving the symbolic trace from the static one, or
  tracing the first call symbolically and generating its static program by substituting the sizes)
  would save the 14 ms that stand between the default and eager's total (about 1.0x then): not done.
- The upgrade's work in the user's process (same session): with a remembered verdict 13-32 ms of the
  upgrade thread's CPU time a job (no judge); the first upgrade of a process 2.7-3.1 s where the
  kept symbolic region had no direct bundle (kept at 17:01 today, before symbolic regions had one):
  it loaded through `CompiledArtifact.load`, importing inductor and Dynamo into the user's process,
  and did so again in every later process, since a region loaded so never got its bundle. Now the
  worker compiles such a region once more and keeps its bundle (squall_inductor.worker.load_kept).
  With a copy of that stale cache per run, the stream's 4 passes and the upgrades waited for, main
  then the branch, two pairs, load 2.4-3.3: the upgrade jobs' CPU time in the user's process
  2730 + 54 ms and 2856 ms (main, inductor imported) against 103 and 97 ms (branch, not imported);
  the first upgrade's time to fused 8.3 / 7.7 s against 27.0 / 24.2 s (the worker's compile, once).
- This bench, main (964945a) and the branch alternating (main, branch, main, branch),
  --no-torch-compile --rounds 5, load 4.0-4.7 (other sessions' tests and compiles: eager's best
  total moved 0.12-0.37 s between runs, so wall ratios say nothing), the default's CPU-time ratio
  to eager: main 1.13x and 0.86x, the branch 1.11x and 1.30x (2 compiles in each); torch only 1.16x,
  1.31x / 1.22x, 1.31x; dynamic=True 1.06x, 0.97x / 0.82x, 1.08x (1 compile). The stream's code path
  is the same on both (the change is in loading kept regions); the spread is the load's.
  bench/generation.py --no-torch-compile --no-stream, load 3.0-6.1: llama 2/0/0 compiles and
  tokens equal eager's on both (squall 1.95x / 1.48x eager's tokens/s on main, 1.61x / 2.65x and
  1.89x / 1.92x on the branch), gpt2 2/0/0 and equal on the branch (main's run stopped at its
  600 s limit while its upgrades compiled). bench/overhead.py's cached `a + b`, alternating, load
  5.3-6.9: main 1.57x, 1.49x, 1.62x eager; the branch 1.10x, 1.73x, 1.56x (the hot path is untouched).
- Learned dimensions kept on disk and remembered by default (2026-11-27, fourth session; Dynamo's
  local automatic-dynamic profile is on by default too), two runs one after the other, load
  1.5-2.5, CPU time (best of 3, then of 4): squall 2 compiles, 1.07x / 1.88x eager; squall,
  remembered dims (rounds 2+), what a later run of the same code now gets, 1 compile, 1.04x /
  1.26x; squall(dynamic=True) 1 compile, 0.92x / 1.49x; torch only 1.10x (first run only). The
  same stream in two fresh processes sharing one squall cache folder, the default, torch executor
  only (load 3-5): 2 compiles, 1.48x eager's CPU, then 1 compile, 1.05x. A first run still
  compiles twice: its total stays above eager's (about 1.1x quiet).
- 2026-11-28, main (dd82063), --no-torch-compile, three sittings (load 0.3-0.9, quiet; eager's
  40 batches took 0.15-0.17 s on this day's machine, about 3.5x the 2026-11-26 machine's), wall /
  CPU time against eager: squall 1.51x / 1.37x (best of 3), 0.94x / 0.89x (best of 2, its
  upgrade's judgement and regions remembered on disk from the first sitting), 1.07x / 1.07x (best
  of 4); torch only 1.11x / 1.09x, 1.11x / 1.09x, 0.96x / 0.98x; squall(dynamic=True) 1.03x /
  0.89x. Two compiles took 65.6 ms of CPU (call by call); the warm stream 0.58-0.71x eager's. So a
  first run sits at eager's total within this machine's spread, not reliably under it. One
  compile, profiled (bench/compile_phases.py --executors torch: static 31 ms, its trace 19 ms, 353
  µs per traced op): no call stands out; a first process also compiles the 12 KB state check
  (`compile()` 5.2 ms, about 17 µs per condition), which later processes load from disk.
- A batch of 1 on the fused plan (2026-11-28, --no-torch-compile --rounds 3 --only squall "squall,
  torch only" --fused-warm --calls, load 0.5-0.9, the warm pass's CPU time against eager's, per
  batch size 1 / 4 / 8). Before (8c23ec8's parent, its symbolic.py): the fused plan 0.74x / 0.56x
  / 0.60x, the torch plan 0.61x / 0.69x / 0.72x: a batch of 1 ran slower fused than on the torch
  plan, since inductor's symbolic regions specialise a size of 1 and their guards sent it to static
  compilations (four lengths), then to the regions' torch calls behind a Python check of every
  input's memory order. After (one more symbolic compilation with the batch the constant 1, for
  every length): 0.50x / 0.56x / 0.62x, the torch plan 0.65x / 0.73x / 0.76x; the whole warm stream
  0.57x eager (torch plan 0.72x), before 0.56x at a noisier eager (0.62x).
- 2026-11-28 (second session, 0a55eff), --no-torch-compile --rounds 3 --only squall "squall, torch
  only" "squall(dynamic=True)", load 1.2-1.4 (this day's machine: eager's 40 batches 0.088 s), wall /
  CPU against eager: squall 1.21x / 1.20x (2 compiles), warm 0.83x; torch only 1.18x / 1.17x (2),
  warm 0.72x; squall(dynamic=True) 0.99x / 0.98x (1), warm 0.83x. bench/compile_phases.py
  --executors torch beside a background job (load 1.6): a compile 21 ms best, 14.4 of it the trace
  (267 µs per traced op on this machine). "Trace symbolic, key static" (the symfirst branch,
  rebased, not merged) with `$SQUALL_SYMBOLIC_FIRST=1` over the whole suite: 120 of 10,144 tests
  fail; most because the upgrade then plans the symbolic trace of a fixed-shape program, which a
  fuser without symbolic sizes declines (the tests' fusers), and an entry sharing the program with
  a symbolic key would share its upgrade too, so a static compile of the regions cannot stand in.
- 2026-11-28 (third session, 5eb0158), --no-torch-compile --rounds 3 --only squall "squall, torch only"
  "squall(dynamic=True)", load 0.7-1.9, wall / CPU against eager (eager 0.099 s): squall 1.25x / 1.24x
  (2 compiles), warm 0.87x; torch only 1.07x / 1.07x (2), warm 0.70x; squall(dynamic=True) 0.95x /
  0.94x (1), warm 0.75x. With --calls (load 0.9-1.9): the default's 2 compiles 64 ms of CPU and its 38
  hits 98 ms, torch only's 42 and 65 ms; with SQUALL_INDUCTOR_SUBPROCESS=0 (no compile worker) the
  default's 48 and 75 ms, torch only's 63 and 68 ms. Whether the worker, busy on the other core, slows
  the calling thread was not settled: eager's 40 batches alone took 93-168 ms of CPU (best of 5, four
  rounds), beside a nice-19 busy loop 86-175 ms, beside a nice-19 import of inductor 93-150 ms.
- 2026-11-28 (fourth session, 76d9ac8), --no-torch-compile --rounds 3, load 0.7-1.1: eager 0.102 s;
  squall 1.10x (2 compiles), warm 0.72x; torch only 1.50x; squall(dynamic=True) 1.39x wall / 1.26x
  CPU (1 compile); the what-if with the first call eager 1.20x / 1.14x. --calls, eager 120.7 ms of
  CPU: the default's 2 compiles 76.5 ms and 38 hits 88.1 ms; dynamic=True's one compile 40.3 ms and
  39 hits 104.9 ms. This machine's Python is slow: bench/compile_phases.py --executors torch gave a
  static trace of 12.7-18.4 ms, the same for d4d5c7f (2026-11-26, whose docstring has 6-7 ms) run
  alternately with it here, so not a regression. At that cost one compile outweighs what the hits
  save over 40 batches, whichever the policy.
- 2026-11-29 (e0ad836), --no-torch-compile --only squall "squall, torch only" "squall(dynamic=True)",
  fresh caches per run, four runs in a row (best of 3, 5, 5 and 5 rounds; load 0.9-1.7), wall time
  against eager (eager 0.098-0.128 s): squall 0.88x, 1.00x, 1.28x, 1.21x (2 compiles each), warm
  0.48-0.80x; torch only 1.12x, 1.02x, 0.98x, 1.00x (2); squall(dynamic=True) 0.59x, 0.92x, 0.74x
  (1 compile). The default's first pass straddles eager's total from run to run on this machine;
  dynamic=True's stays under it. With --calls (load 1.0): the default's 2 compiles 59.7 ms of CPU
  and 38 hits 62.4 ms, torch only's 48.4 and 53.4 ms, eager's 40 calls 101.4 ms. The symbolic
  entry's calls reach upgrade_worker.HOT_S (50 ms) near the stream's end on this machine: in a probe
  beside another job (so slower calls), its background upgrade (paced to a tenth of the
  interpreter, squall.market.pacing) was queued inside the stream in 3 of 4 rounds.
"""
from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time
import warnings
from collections.abc import Callable

import torch

import squall
from squall.runtime import dims_profile, upgrade_worker
from squall.runtime.jit import jitted_state

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from real_models import import_torchvision  # noqa: E402

VOCAB = 97


def build_model(dim: int) -> torch.nn.Module:
    import transformers

    torch.manual_seed(0)
    config = transformers.DistilBertConfig(vocab_size=VOCAB, dim=dim, hidden_dim=2 * dim, n_layers=2, n_heads=2,
                                           max_position_embeddings=128)
    return transformers.DistilBertModel(config).eval()


def make_stream(batches: int, seed: int = 0) -> list[torch.Tensor]:
    rng = random.Random(seed)
    shapes = [(rng.choice([1, 4, 8]), rng.randint(8, 128)) for _ in range(batches)]
    return [torch.randint(1, VOCAB, shape) for shape in shapes]


def squall_compiles(fn: Callable) -> int:
    return jitted_state(fn).cache_info().misses


def dynamo_compiles() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def contenders(model: torch.nn.Module, with_torch_compile: bool) -> dict[str, Callable[[], tuple[Callable, Callable[[], int]]]]:
    """name -> a builder of (a fresh callable, how many compiles it has made so far)."""

    def squall_default():
        fn = squall.jit(model)
        return fn, lambda: squall_compiles(fn)

    def squall_upgrade_at_once():
        fn = squall.jit(model)
        return _upgrading_at_once(fn), lambda: squall_compiles(fn)

    def squall_zero_one_at_once():
        fn = squall.jit(model)
        jitted_state(fn)._dims.zero_one_eagerly = False
        return fn, lambda: squall_compiles(fn)

    def squall_length_only():
        fn = squall.jit(model)
        jitted_state(fn)._dims.batch_with_length = False
        jitted_state(fn)._dims.zero_one_eagerly = False
        return fn, lambda: squall_compiles(fn)

    def squall_torch_only():
        fn = squall.jit(model, executors=["torch"])
        return fn, lambda: squall_compiles(fn)

    def squall_dynamic():
        fn = squall.jit(model, dynamic=True)
        return fn, lambda: squall_compiles(fn)

    def squall_remembered():
        # $SQUALL_REMEMBER_DYNAMIC: this jit starts with the dimensions the last round's jit of the
        # model's forward learned (squall.runtime.dims_profile); its first round learns them as the default does
        os.environ[dims_profile.REMEMBER_ENV] = "1"
        try:
            fn = squall.jit(model)
        finally:
            os.environ[dims_profile.REMEMBER_ENV] = "0"
        return fn, lambda: squall_compiles(fn)

    def squall_dynamic_first_eager():
        # a what-if for the default policy: its first call run eagerly (no static compile a stream
        # wastes), the second compiled with the changed sizes symbolic (here: every size, as dynamic=True)
        fn = squall.jit(model, dynamic=True)
        return _first_call_eager(fn, model), lambda: squall_compiles(fn)

    def compiled(dynamic):
        def build():
            torch._dynamo.reset()
            fn, start = torch.compile(model, dynamic=dynamic), dynamo_compiles()
            return fn, lambda: dynamo_compiles() - start
        return build

    found = {"eager": lambda: (model, lambda: 0), "squall": squall_default, "squall, upgrade at 1st call": squall_upgrade_at_once,
             "squall, batch of 1 compiled": squall_zero_one_at_once, "squall, length only": squall_length_only,
             "squall, torch only": squall_torch_only, "squall(dynamic=True)": squall_dynamic,
             "squall(dynamic=True), 1st call eager": squall_dynamic_first_eager, "squall, remembered dims (rounds 2+)": squall_remembered}
    if with_torch_compile:
        found["torch.compile(dynamic=True)"] = compiled(True)
        found["torch.compile()"] = compiled(None)
    return found


def _upgrading_at_once(fn: Callable) -> Callable:
    """`fn`, each new entry's upgrade queued after its first call (the policy before upgrade_worker.HOT_S)."""

    def call(**kwargs):
        known = {id(u) for u in squall.upgrades(fn)}
        out = fn(**kwargs)
        for upgrade in squall.upgrades(fn):
            if id(upgrade) not in known and upgrade.status == "cold":
                upgrade_worker.default_worker().queue_now(upgrade)
        return out

    call.__wrapped__ = fn
    return call


def _first_call_eager(fn: Callable, model: torch.nn.Module) -> Callable:
    """`fn`, its first call run eagerly by `model` instead (counted as a rented call)."""
    called = []

    def call(**kwargs):
        if not called:
            called.append(True)
            jitted_state(fn).stats.eager_before_compile += 1
            return model(**kwargs)
        return fn(**kwargs)

    call.__wrapped__ = fn
    return call


def _settle(fn: Callable, stream: list[torch.Tensor]) -> None:
    """Wait for `fn`'s background upgrade, run the stream once more (the calls its fused regions'
    guards refuse, a batch of 1, start their own compilations) and wait for those compilations."""
    squall.wait_for_upgrades(fn)
    run_stream(fn, stream)
    try:
        from squall_inductor.symbolic import wait_for_variants
    except ImportError:  # no inductor plugin: nothing compiles later
        return
    wait_for_variants()


def run_stream(fn: Callable, stream: list[torch.Tensor]) -> tuple[float, list[torch.Tensor], list[tuple[str, float]]]:
    """The stream through `fn`: its wall time, its outputs, and per call what it did (for squall:
    "compile", "rented" (eager while a 0/1 variant waits, squall.runtime.ski_rental) or "hit";
    "eager" for the others) and the calling thread's CPU time it took."""
    gc.collect()  # the last contender's garbage is not this one's to collect
    try:
        stats = jitted_state(getattr(fn, "__wrapped__", fn)).stats
    except TypeError:  # eager, torch.compile
        stats = None
    outs, calls = [], []
    start = time.perf_counter()
    for x in stream:
        before = (stats.misses, stats.eager_before_compile) if stats is not None else None
        cpu = time.thread_time()
        outs.append(fn(input_ids=x).last_hidden_state)
        cpu = time.thread_time() - cpu
        kind = "eager" if stats is None else "compile" if stats.misses > before[0] else "rented" if stats.eager_before_compile > before[1] else "hit"
        calls.append((kind, cpu))
    return time.perf_counter() - start, outs, calls


def print_calls(name: str, stream: list[torch.Tensor], calls: list[tuple[str, float]], warm: list[tuple[str, float]],
                eager_warm: list[tuple[str, float]]) -> None:
    """One contender's stream call by call, on the calling thread's CPU time: its compiles, rented
    calls and hits in the first pass, then per batch size its warm calls against eager's."""
    parts = []
    for kind in ("compile", "rented", "hit", "eager"):
        took = [cpu for k, cpu in calls if k == kind]
        if took:
            parts.append(f"{len(took)} {kind} {sum(took) * 1e3:.1f} ms")
    print(f"  {name}: first pass CPU {sum(c for _, c in calls) * 1e3:.1f} ms = " + ", ".join(parts))
    for batch in sorted({x.shape[0] for x in stream}):
        at = [i for i, x in enumerate(stream) if x.shape[0] == batch]
        first = sum(calls[i][1] for i in at)
        w, e = sum(warm[i][1] for i in at), sum(eager_warm[i][1] for i in at)
        kinds = ", ".join(f"{sum(calls[i][0] == k for i in at)} {k}" for k in ("compile", "rented", "hit") if any(calls[i][0] == k for i in at))
        print(f"    batch {batch}: {len(at):>2} calls, first pass {first * 1e3:5.1f} ms ({kinds or 'eager'}); warm {w * 1e3:5.1f} ms, eager's {e * 1e3:5.1f} ms ({w / e:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--calls", action="store_true", help="also each contender's calls: compiles, rented, hits, per batch size")
    parser.add_argument("--only", nargs="*", default=None, help="these contenders only (by name; eager always runs)")
    parser.add_argument("--fused-warm", action="store_true",
                        help="time the warm stream once squall's background upgrade and the compilations it starts are done (the fused plan at every batch size)")
    opts = parser.parse_args()
    # every round of every contender a first run (but the remembered dims' own, which turns it on)
    os.environ[dims_profile.REMEMBER_ENV] = "0"
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    import_torchvision()
    model = build_model(opts.dim)
    stream = make_stream(opts.batches)
    builders = contenders(model, not opts.no_torch_compile)
    if opts.only is not None:
        unknown = set(opts.only) - set(builders)
        if unknown:
            raise SystemExit(f"unknown contenders {sorted(unknown)}; known: {', '.join(builders)}")
        builders = {name: build for name, build in builders.items() if name == "eager" or name in opts.only}
    cold: dict[str, list[float]] = {name: [] for name in builders}
    warm: dict[str, list[float]] = {name: [] for name in builders}
    cpu: dict[str, list[float]] = {name: [] for name in builders}
    first_calls: dict[str, tuple[float, list]] = {}  # the first pass of least CPU time: its calls
    warm_calls: dict[str, list[list]] = {name: [] for name in builders}  # each round's warm pass, call by call
    compiles: dict[str, int] = {}
    worst: dict[str, float] = {}
    with torch.no_grad():
        expected = [model(input_ids=x).last_hidden_state for x in stream]
        for _ in range(opts.rounds):
            for name, build in builders.items():
                fn, count = build()
                seconds, outs, calls = run_stream(fn, stream)
                cold[name].append(seconds)
                cpu[name].append(sum(c for _, c in calls))
                compiles[name] = count()
                worst[name] = max(float((a - e).abs().max()) for a, e in zip(outs, expected))
                if opts.fused_warm and name.startswith("squall"):
                    _settle(getattr(fn, "__wrapped__", fn), stream)
                seconds, _, again = run_stream(fn, stream)
                warm[name].append(seconds)
                warm_calls[name].append(again)
                if name not in first_calls or cpu[name][-1] < first_calls[name][0]:
                    first_calls[name] = (cpu[name][-1], calls)
                if name.startswith("squall"):
                    squall.wait_for_upgrades(getattr(fn, "__wrapped__", fn))  # the next contender's time is its own
    load = os.getloadavg()
    print(f"length stream: DistilBERT dim {opts.dim}, {opts.batches} batches of batch size 1/4/8 and length 8-128; "
          f"one thread; best of {opts.rounds} rounds; load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  {'contender':38}{'total (compiles in)':>20}{'vs eager':>10}{'CPU':>9}{'vs eager':>10}{'compiles':>10}{'warm stream':>13}{'vs eager':>10}{'max |diff|':>12}")
    base_cold, base_warm, base_cpu = min(cold["eager"]), min(warm["eager"]), min(cpu["eager"])
    for name in builders:
        c, w, t = min(cold[name]), min(warm[name]), min(cpu[name])
        print(f"  {name:38}{c:>19.3f}s{c / base_cold:>9.2f}x{t:>8.3f}s{t / base_cpu:>9.2f}x{compiles[name]:>10}{w:>12.3f}s{w / base_warm:>9.2f}x{worst[name]:>12.1e}")
    if opts.calls:
        print("call by call, on the calling thread's CPU time (the first pass of least CPU time; each warm call's least):")
        least = {name: [min(runs, key=lambda call: call[1]) for runs in zip(*warm_calls[name])] for name in builders}
        for name in builders:
            print_calls(name, stream, first_calls[name][1], least[name], least["eager"])


if __name__ == "__main__":
    main()
