# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""`make bench-scale`: the controller at 100, 250 and 1,000 inventory hosts, no simulated node on its cores.

1. Fleet (skipped when BENCH_RECORDING names a recording): bring the simulated fleet up (BENCH_SCALE_NODES, default
   4: one node of each kind), converge it with playbooks/site.yml, then record a no-op site.yml and a readiness.yml
   on it (bench/scale_run.py --record: every answer the ssh plugin gave the controller) into
   .tmp/bench-scale/recording/ (BENCH_SCALE_RECORD_TO moves it).
2. Cold SSH, on the same fleet: site.yml and readiness.yml with an empty ControlPath folder (as an hourly run finds it
   with ControlPersist 60 s), ansible's processes in one cpuacct cgroup and every ssh process (clients and the
   ControlPersist masters they fork) in another: the ssh client's CPU per node. Then the fleet goes down.
3. Replay: for each size in BENCH_SCALE_SIZES (default "100 250 1000"), site.yml and readiness.yml on an inventory of
   that many hosts, each the copy of a recorded node, answered by bench/connection_plugins/bench_replay.py, with
   forks BENCH_SCALE_FORKS (default 50): wall time, main process CPU and peak memory, all controller CPU, bytes of
   facts / registered / set_fact values kept per host (bench/callback_plugins/bench_scale.py), no-op or not.
   With py-spy (BENCH_SCALE_PYSPY=1, the default, installs it into .tmp/bench-scale/py-spy when missing) the main
   process of the largest size's runs is sampled; the summaries go to bench/results/scale-profile-*.txt.
4. Writes bench/results/scale-latest.json and scale-latest.md (BENCH_OUT moves them) with the date, the git revision,
   ansible-core, the load average during each run, and the time of each step.

Environment: BENCH_RECORDING (replay a recording: skips 1 and 2), BENCH_SCALE_SIZES, BENCH_SCALE_FORKS,
BENCH_SCALE_NODES, BENCH_SCALE_PYSPY (0: no profile), BENCH_SCALE_SKIP_SSH=1, BENCH_KEEP=1 (leave the fleet up),
BENCH_OUT, and the testbed's TESTBED_PREFIX / TESTBED_SUBNET / TESTBED_DIR (give your own beside another fleet).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import datetime
import glob
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import scalestats  # noqa: E402  pylint: disable=wrong-import-position

BIN = os.path.dirname(sys.executable)
WORK = os.path.join(ROOT, '.tmp', 'bench-scale')
TESTBED_DIR = os.environ.get('TESTBED_DIR') or os.path.join(ROOT, '.testbed')
PLAYBOOKS = (('site', os.path.join(ROOT, 'playbooks', 'site.yml')),
             ('readiness', os.path.join(ROOT, 'playbooks', 'readiness.yml')))
CGROUP_V1 = '/sys/fs/cgroup/cpuacct'
CGROUP_V2 = '/sys/fs/cgroup'


def log(msg):
    print('bench-scale: ' + msg, flush=True)


def loadavg():
    with open('/proc/loadavg') as handle:
        return [float(x) for x in handle.read().split()[:3]]


def load_plugin():
    spec = importlib.util.spec_from_file_location('bench_replay', os.path.join(HERE, 'connection_plugins',
                                                                               'bench_replay.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LoadSampler(object):
    """The 1-minute load average every 2 s while a run goes on (this process, not the measured one)."""

    def __init__(self):
        self.samples = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.is_set():
            self.samples.append(loadavg()[0])
            self.stop.wait(2.0)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.samples.append(loadavg()[0])

    def summary(self):
        s = self.samples or [0.0]
        return {'start': s[0], 'max': max(s), 'mean': round(sum(s) / len(s), 2), 'end': s[-1]}


class CpuGroup(object):
    """A cgroup whose CPU time is read after its processes have gone (cgroup v1 cpuacct, or v2's cpu.stat)."""

    def __init__(self, name):
        self.path = None
        if os.path.isfile(os.path.join(CGROUP_V1, 'cpuacct.usage')):
            self.path, self.v2 = os.path.join(CGROUP_V1, name), False
        elif os.path.isfile(os.path.join(CGROUP_V2, 'cgroup.controllers')):
            self.path, self.v2 = os.path.join(CGROUP_V2, name), True
        if self.path:
            try:
                os.mkdir(self.path)
            except OSError as exc:
                log('no cgroup {0}: {1}'.format(self.path, exc))
                self.path = None

    @property
    def procs_file(self):
        return os.path.join(self.path, 'cgroup.procs')

    def pids(self):
        with open(self.procs_file) as handle:
            return [int(p) for p in handle.read().split()]

    def usage_s(self):
        if self.v2:
            with open(os.path.join(self.path, 'cpu.stat')) as handle:
                stat = dict(line.split() for line in handle if line.strip())
            return int(stat['usage_usec']) / 1e6
        with open(os.path.join(self.path, 'cpuacct.usage')) as handle:
            return int(handle.read()) / 1e9

    def drain(self, timeout=20):
        """Wait for the group's processes to end; end those left after timeout (our own ssh masters), by pid."""
        deadline = time.monotonic() + timeout
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        while self.pids() and time.monotonic() < deadline + 5:
            time.sleep(0.2)

    def remove(self):
        if self.path:
            try:
                os.rmdir(self.path)
            except OSError as exc:
                log('cgroup {0} left: {1}'.format(self.path, exc))


class ScaleBench(object):
    def __init__(self):
        self.sizes = [int(s) for s in (os.environ.get('BENCH_SCALE_SIZES') or '100 250 1000').split()]
        self.forks = int(os.environ.get('BENCH_SCALE_FORKS') or 50)
        self.nodes = int(os.environ.get('BENCH_SCALE_NODES') or 4)
        self.recording = os.environ.get('BENCH_RECORDING') or None
        self.record_to = os.environ.get('BENCH_SCALE_RECORD_TO') or os.path.join(WORK, 'recording')
        self.pyspy = (os.environ.get('BENCH_SCALE_PYSPY') or '1') not in ('0', 'no', 'false')
        self.skip_ssh = os.environ.get('BENCH_SCALE_SKIP_SSH') == '1'
        self.keep = os.environ.get('BENCH_KEEP') == '1'
        self.out = os.environ.get('BENCH_OUT') or os.path.join(HERE, 'results')
        self.plugin = load_plugin()
        self.fleet_up = False
        self.steps = {}
        self.notes = []
        purelib = subprocess.check_output([sys.executable, '-c',
                                           'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                                          universal_newlines=True).strip()
        self.env = dict(os.environ)
        self.env.update({
            'ANSIBLE_COLLECTIONS_PATH': '{0}:{1}'.format(os.path.join(ROOT, '.tmp', 'collections'), purelib),
            'ANSIBLE_COLLECTIONS_SCAN_SYS_PATH': 'false',
            'ANSIBLE_NOCOLOR': '1',
            'ANSIBLE_RETRY_FILES_ENABLED': 'false',
            'ANSIBLE_CALLBACKS_ENABLED': 'bench_scale',
            'ANSIBLE_CALLBACK_PLUGINS': os.path.join(HERE, 'callback_plugins'),
            # Ansible's defaults, set so that no ansible.cfg changes what the figures mean.
            'ANSIBLE_PIPELINING': 'False',
            'ANSIBLE_STRATEGY': 'linear',
        })

    # -- running -----------------------------------------------------------------------------------------------------
    def step(self, name, start):
        self.steps[name] = round(time.monotonic() - start, 1)

    def testbed(self, *args):
        cmd = [sys.executable, os.path.join(ROOT, 'tests', 'testbed', 'testbed.py')] + list(args)
        log(' '.join(cmd[1:]))
        subprocess.check_call(cmd, cwd=ROOT, env=self.env)

    def playbook(self, tag, playbook, inventories, extra_env=None, extra_args=None, record=None, wrap=None,
                 forks=None):
        """Run a playbook through scale_run.py; returns (stats, callback, load) or raises with the log's path."""
        folder = os.path.join(WORK, 'runs')
        os.makedirs(folder, exist_ok=True)
        stats_path = os.path.join(folder, tag + '.stats.json')
        cb_path = os.path.join(folder, tag + '.callback.json')
        for path in (stats_path, cb_path):
            if os.path.exists(path):
                os.remove(path)
        env = dict(self.env)
        env.update({'BENCH_SCALE_OUT': cb_path, 'ANSIBLE_FORKS': str(forks or self.forks)})
        env.update(extra_env or {})
        cmd = [sys.executable, os.path.join(HERE, 'scale_run.py'), '--stats', stats_path]
        if record:
            cmd += ['--record', record]
        cmd += ['--']
        for inv in inventories:
            cmd += ['-i', inv]
        cmd += [playbook] + list(extra_args or [])
        if wrap:
            cmd = wrap + cmd
        log_path = os.path.join(folder, tag + '.log')
        with open(log_path, 'w') as handle, LoadSampler() as load:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
            self.on_start(tag, proc)
            proc.wait()
        if not os.path.exists(stats_path):
            raise SystemExit('bench-scale: {0}: no figures (rc={1}); see {2}'.format(tag, proc.returncode, log_path))
        with open(stats_path) as handle:
            stats = json.load(handle)
        callback = None
        if os.path.exists(cb_path):
            with open(cb_path) as handle:
                callback = json.load(handle)
        log('{0}: {1:.1f} s, rc={2}, load {3}'.format(tag, stats['wall_s'], stats['rc'], load.summary()))
        return stats, callback, load.summary()

    def on_start(self, tag, proc):
        """py-spy on the main process of the runs to profile."""
        if tag in self.profile_tags:
            out = os.path.join(WORK, 'runs', tag + '.pyspy.txt')
            self.profilers[tag] = (subprocess.Popen(
                [self.pyspy_bin, 'record', '--pid', str(proc.pid), '--format', 'raw', '--rate', '50',
                 '--nonblocking', '-o', out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out)

    # -- 1. the fleet and the recording --------------------------------------------------------------------------------
    def report_overlay(self):
        path = os.path.join(WORK, 'overlay.yml')
        import yaml
        with open(path, 'w') as handle:
            yaml.safe_dump({'all': {'vars': {'nodeprep_readiness_report_dir': os.path.join(WORK, 'report')}}},
                           handle)
        return path

    def record(self):
        start = time.monotonic()
        self.testbed('up', '--nodes', str(self.nodes))
        self.fleet_up = True
        self.step('fleet_up_s', start)
        inventory = os.path.join(TESTBED_DIR, 'inventory.yml')
        overlay = self.report_overlay()
        start = time.monotonic()
        # The converge: every node at once (not measured); a second one when the first still changed something.
        for attempt in (1, 2):
            stats, callback, dummy = self.playbook(
                'converge-{0}'.format(attempt), PLAYBOOKS[0][1], [inventory, overlay],
                extra_args=['-e', 'nodeprep_disruptive_serial=100%'], forks=5)
            noop, why, dummy = scalestats.run_verdict(callback or {}, 'site')
            if noop:
                break
            if stats['rc'] and attempt == 2:
                raise SystemExit('bench-scale: the fleet did not converge: {0}'.format('; '.join(why)))
        self.step('converge_s', start)
        start = time.monotonic()
        if os.path.isdir(self.record_to):
            shutil.rmtree(self.record_to)
        raw = os.path.join(self.record_to, 'raw')
        record_runs = {}
        for name, playbook in PLAYBOOKS:
            stats, callback, load = self.playbook('record-' + name, playbook, [inventory, overlay],
                                                  record=os.path.join(raw, name), forks=self.nodes)
            noop, why, facts = scalestats.run_verdict(callback or {}, name)
            record_runs[name] = {'noop': noop, 'not_noop_because': why, 'run': facts, 'wall_s': stats['wall_s']}
            if not noop:
                self.notes.append('the recorded {0}.yml run was not a no-op: {1}'.format(name, '; '.join(why)))
        with open(inventory) as handle:
            import yaml
            inv = yaml.safe_load(handle)
        self.compile(inv, raw, record_runs)
        self.step('record_s', start)
        return self.record_to

    def compile(self, inv, raw, record_runs):
        """raw/<playbook>/<address>.jsonl -> <playbook>/<node>/index.json + <n>.out, and recording.json."""
        by_address = scalestats.addresses(inv)
        nodes = set()
        for name, dummy in PLAYBOOKS:
            for path in sorted(glob.glob(os.path.join(raw, name, '*.jsonl'))):
                address = os.path.basename(path)[:-len('.jsonl')]
                node = by_address.get(address)
                if node is None:
                    raise SystemExit('bench-scale: recorded address {0} is in no inventory host'.format(address))
                nodes.add(node)
                index, outputs = scalestats.compile_recording(scalestats.read_jsonl(path),
                                                              self.plugin.normalize_command, self.plugin.params_key)
                folder = os.path.join(self.record_to, name, node)
                os.makedirs(folder)
                for fname, text in outputs.items():
                    with open(os.path.join(folder, fname), 'wb') as handle:
                        handle.write(text.encode('utf-8', 'surrogateescape'))
                with open(os.path.join(folder, 'index.json'), 'w') as handle:
                    json.dump(index, handle, indent=1, sort_keys=True)
                if index['conflicts']:
                    self.notes.append('{0}/{1}: commands recorded twice with different answers (the first is '
                                      'replayed): {2}'.format(name, node, index['conflicts']))
        meta = {'date_utc': utcnow(), 'commit': git_revision(), 'ansible': ansible_version(),
                'nodes': sorted(nodes), 'inventory': inv, 'runs': record_runs}
        with open(os.path.join(self.record_to, 'recording.json'), 'w') as handle:
            json.dump(meta, handle, indent=1, sort_keys=True)

    # -- 2. cold SSH -----------------------------------------------------------------------------------------------------
    def cold_ssh(self):
        inventory = os.path.join(TESTBED_DIR, 'inventory.yml')
        overlay = self.report_overlay()
        results = []
        for name, playbook in PLAYBOOKS:
            tag = 'cold-ssh-' + name
            stamp = '{0}-{1}'.format(os.environ.get('TESTBED_PREFIX') or 'nptb', os.getpid())
            ansible_cg = CpuGroup('bench-scale-{0}-ansible'.format(stamp))
            ssh_cg = CpuGroup('bench-scale-{0}-ssh'.format(stamp))
            cpdir = os.path.join(WORK, 'cp-' + name)
            shutil.rmtree(cpdir, ignore_errors=True)
            os.makedirs(cpdir)
            env = {'ANSIBLE_SSH_CONTROL_PATH_DIR': cpdir}
            wrap = None
            if ansible_cg.path and ssh_cg.path:
                ssh_wrapper = os.path.join(WORK, 'ssh-in-cgroup')
                with open(ssh_wrapper, 'w') as handle:
                    handle.write('#!/bin/sh\n# Written by bench/scale_bench.py: every ssh process in its cgroup.\n'
                                 'echo $$ > {0}\nexec ssh "$@"\n'.format(ssh_cg.procs_file))
                os.chmod(ssh_wrapper, 0o755)
                env['ANSIBLE_SSH_EXECUTABLE'] = ssh_wrapper
                wrap = ['/bin/sh', '-c', 'echo $$ > {0} && exec "$@"'.format(ansible_cg.procs_file), 'sh']
            else:
                self.notes.append('cold SSH: no cgroup to count the ssh processes in; ssh CPU not measured')
            stats, callback, load = self.playbook(tag, playbook, [inventory, overlay], extra_env=env, wrap=wrap,
                                                  forks=self.nodes)
            # The ControlPersist masters outlive the run (60 s): ask them to exit, then read the groups.
            for sock in glob.glob(os.path.join(cpdir, '*')):
                subprocess.call(['ssh', '-o', 'ControlPath=' + sock, '-O', 'exit', 'bench'],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            hosts = len((callback or {}).get('recap') or {}) or self.nodes
            noop, why, facts = scalestats.run_verdict(callback or {}, name)
            row = {'playbook': name, 'hosts': hosts, 'wall_s': round(stats['wall_s'], 2), 'noop': noop,
                   'not_noop_because': why, 'load': load,
                   'main_cpu_per_host_ms': round(1000.0 * (stats['main_user_s'] + stats['main_sys_s']) / hosts, 1)}
            if ansible_cg.path and ssh_cg.path:
                ssh_cg.drain()
                ansible_cg.drain()
                ssh_cpu, ansible_cpu = ssh_cg.usage_s(), ansible_cg.usage_s()
                row.update({'ssh_cpu_s': round(ssh_cpu, 3), 'ansible_cpu_s': round(ansible_cpu, 3),
                            'ssh_cpu_per_host_s': round(ssh_cpu / hosts, 3),
                            'ansible_cpu_per_host_s': round(ansible_cpu / hosts, 3)})
            ssh_cg.remove()
            ansible_cg.remove()
            results.append(row)
        return results

    # -- 3. replay -------------------------------------------------------------------------------------------------------
    def replay(self, recording, sizes=None):
        import yaml
        with open(os.path.join(recording, 'recording.json')) as handle:
            meta = json.load(handle)
        overlay = {'nodeprep_readiness_report_dir': os.path.join(WORK, 'report')}
        figures = []
        sizes = sizes if sizes is not None else self.sizes
        largest = max(self.sizes)
        for hosts in sizes:
            inv = scalestats.replay_inventory(meta['inventory'], meta['nodes'], hosts, overlay)
            inv_path = os.path.join(WORK, 'replay-{0}.yml'.format(hosts))
            with open(inv_path, 'w') as handle:
                yaml.safe_dump(inv, handle, default_flow_style=False)
            for name, playbook in PLAYBOOKS:
                tag = 'replay-{0}-{1}'.format(name, hosts)
                replay_log = os.path.join(WORK, 'runs', tag + '.replay.log')
                if os.path.exists(replay_log):
                    os.remove(replay_log)
                env = {'ANSIBLE_CONNECTION_PLUGINS': os.path.join(HERE, 'connection_plugins'),
                       'BENCH_REPLAY_DIR': os.path.join(recording, name), 'BENCH_REPLAY_LOG': replay_log}
                if hosts == largest and self.pyspy_bin and sizes is self.sizes:
                    self.profile_tags.add(tag)
                stats, callback, load = self.playbook(tag, playbook, [inv_path], extra_env=env)
                row = scalestats.replay_figures(hosts, stats, callback, name)
                row['load'] = load
                row['replayed_module_calls'] = count_lines(replay_log)
                if tag in self.profilers:
                    row['profile'] = self.finish_profile(tag, name, hosts)
                figures.append(row)
                log('{0}: main {1} ms/host, all {2} s/host, peak {3} MB, facts {4} kB, no-op {5}'.format(
                    tag, row['main_cpu_per_host_ms'], row['all_cpu_per_host_s'], row['main_peak_mb'],
                    row['facts_kb_per_host'], row['noop']))
        return figures, meta

    def finish_profile(self, tag, name, hosts):
        proc, out = self.profilers.pop(tag)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait()
        if not os.path.exists(out):
            self.notes.append('py-spy wrote no profile for {0}'.format(tag))
            return None
        with open(out) as handle:
            summary = scalestats.profile_summary(scalestats.parse_collapsed(handle.read()))
        path = os.path.join(self.out, 'scale-profile-{0}-{1}.txt'.format(name, hosts))
        scalestats.write_text(path, scalestats.profile_text(
            'Main process of a replayed no-op {0}.yml at {1} hosts, forks {2} ({3}, {4})'.format(
                name, hosts, self.forks, git_revision(), utcnow()), summary))
        return {'file': os.path.relpath(path, ROOT), 'groups': summary['groups']}

    def setup_pyspy(self):
        found = shutil.which('py-spy')
        if found:
            return found
        target = os.path.join(WORK, 'py-spy')
        exe = os.path.join(target, 'bin', 'py-spy')
        if not os.path.exists(exe):
            proc = subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--disable-pip-version-check',
                                   '--target', target, 'py-spy'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  universal_newlines=True, check=False)
            if proc.returncode:
                self.notes.append('py-spy not installed ({0}): no profile'.format(proc.stdout.strip()[-200:]))
                return None
        return exe

    # -- the whole thing -------------------------------------------------------------------------------------------------
    def run(self):
        t0 = time.monotonic()
        os.makedirs(WORK, exist_ok=True)
        self.profile_tags, self.profilers = set(), {}
        self.pyspy_bin = self.setup_pyspy() if self.pyspy else None
        conditions = {'date_utc': utcnow(), 'commit': git_revision(), 'ansible': ansible_version(),
                      'python': platform.python_version(), 'host': host_line(), 'loadavg_start': loadavg(),
                      'forks': self.forks, 'sizes': self.sizes,
                      'settings': 'linear strategy, pipelining off, no fact cache (Ansible defaults), forks {0}; '
                                  'replay: modules built (AnsiballZ) and handed to the connection as over ssh, no '
                                  'ssh process'.format(self.forks)}
        doc = {'conditions': conditions, 'steps_s': self.steps, 'notes': self.notes}
        ssh_runs = []
        try:
            if self.recording:
                recording = self.recording
                log('replaying the recording ' + recording)
            else:
                if os.geteuid() != 0:
                    log('needs root for the simulated fleet (or BENCH_RECORDING=<folder> to replay a recording)')
                    return 2
                recording = self.record()
                if not self.skip_ssh:
                    start = time.monotonic()
                    ssh_runs = self.cold_ssh()
                    self.step('cold_ssh_s', start)
                if not self.keep:
                    start = time.monotonic()
                    self.testbed('down')
                    self.fleet_up = False
                    self.step('fleet_down_s', start)
            start = time.monotonic()
            figures, meta = self.replay(recording)
            self.step('replay_s', start)
            if ssh_runs:
                # The same playbooks replayed on as many hosts as the fleet has: beside the cold-SSH run, what the
                # replay leaves out (the ssh processes, and the ssh plugin's own work in the workers).
                small, dummy = self.replay(recording, [len(meta['nodes'])])
                for row in ssh_runs:
                    same = [f for f in small if f['playbook'] == row['playbook']]
                    if same:
                        row['replay_all_cpu_per_host_s'] = same[0]['all_cpu_per_host_s']
                        row['replay_main_cpu_per_host_ms'] = same[0]['main_cpu_per_host_ms']
        finally:
            if self.fleet_up and not self.keep:
                self.testbed('down')
        self.step('total_s', t0)
        conditions['loadavg_end'] = loadavg()
        conditions['recording'] = {'folder': os.path.relpath(recording, ROOT) if recording.startswith(ROOT)
                                   else recording, 'date_utc': meta.get('date_utc'), 'commit': meta.get('commit'),
                                   'ansible': meta.get('ansible'), 'nodes': meta.get('nodes'),
                                   'runs': meta.get('runs')}
        doc.update({'replay': figures, 'cold_ssh': ssh_runs,
                    'growth_1000_over_100': {
                        'main_cpu_per_host': scalestats.growth(figures, 'main_cpu_per_host_ms'),
                        'all_cpu_per_host': scalestats.growth(figures, 'all_cpu_per_host_s')}})
        self.save(doc)
        print(self.markdown(doc))
        bad = [f for f in figures if not f['noop'] or f['rc']]
        return 1 if bad else 0

    def save(self, doc):
        os.makedirs(self.out, exist_ok=True)
        scalestats.write_text(os.path.join(self.out, 'scale-latest.json'),
                              json.dumps(doc, indent=1, sort_keys=True) + '\n')
        scalestats.write_text(os.path.join(self.out, 'scale-latest.md'), self.markdown(doc))

    @staticmethod
    def markdown(doc):
        c = doc['conditions']
        rec = c.get('recording') or {}
        lines = ['# `make bench-scale`', '',
                 '{0}, commit {1}, {2}, Python {3}; {4}.'.format(
                     c['date_utc'], c['commit'], c['ansible'], c['python'], c['host']),
                 'Load average at start {0}, at end {1}. Recording: {2} ({3}, commit {4}, nodes {5}).'.format(
                     c['loadavg_start'], c.get('loadavg_end'), rec.get('folder'), rec.get('date_utc'),
                     rec.get('commit'), ', '.join(rec.get('nodes') or [])),
                 c['settings'] + '.', '',
                 '## Replayed (no simulated node on the controller\'s cores)', '',
                 scalestats.replay_table(doc['replay']), '',
                 'Load average (1 min) during each run: ' + '; '.join(
                     '{0} at {1}: mean {2}, max {3}'.format(
                         f['playbook'], f['hosts'], f['load']['mean'], f['load']['max']) for f in doc['replay']) + '.',
                 '',
                 'Per-host cost at the largest size over the smallest: main process {0}, all controller CPU '
                 '{1}.'.format(doc['growth_1000_over_100']['main_cpu_per_host'],
                               doc['growth_1000_over_100']['all_cpu_per_host']), '']
        for f in doc['replay']:
            if f['hosts'] == max(r['hosts'] for r in doc['replay']):
                lines.append('{0}.yml at {1} hosts: {2} task results per host; plays that matched no host: {3}.'.format(
                    f['playbook'], f['hosts'], f['run']['task_results_per_host'],
                    '; '.join(f['run']['plays_no_hosts']) or 'none'))
        lines.append('')
        if doc.get('cold_ssh'):
            lines += ['## Cold SSH on the real fleet (empty ControlPath folder, ControlPersist 60 s)', '',
                      scalestats.ssh_table(doc['cold_ssh']), '']
        profiles = [f for f in doc['replay'] if f.get('profile')]
        if profiles:
            lines += ['## Where the main process spends its time (py-spy, largest size)', '']
            for f in profiles:
                lines.append('- {0}.yml at {1} hosts ({2}): {3}'.format(
                    f['playbook'], f['hosts'], f['profile']['file'], ', '.join(
                        '{0} {1:.0%}'.format(g, s) for g, s in f['profile']['groups'])))
            lines.append('')
        lines += ['## Steps', '', ', '.join('{0} {1}'.format(k, v) for k, v in sorted(doc['steps_s'].items())), '']
        if doc.get('notes'):
            lines += ['## Notes', ''] + ['- ' + n for n in doc['notes']] + ['']
        return '\n'.join(lines)


def count_lines(path):
    counts = {}
    if os.path.exists(path):
        with open(path) as handle:
            for line in handle:
                parts = line.rstrip('\n').split('\t')
                if len(parts) == 3:
                    key = '{0}: {1}'.format(parts[1].split('.')[-1], parts[2])
                    counts[key] = counts.get(key, 0) + 1
    return counts


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def git_revision():
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, universal_newlines=True, check=False).stdout.strip()
    # Changes to the guides and changelog fragments do not change what is measured.
    dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no', '--', '.', ':!docs',
                            ':!changelogs'], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                           check=False).stdout.strip()
    return commit + (' (with uncommitted changes)' if dirty else '')


def ansible_version():
    out = subprocess.run([os.path.join(BIN, 'ansible'), '--version'], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True, check=False).stdout
    return out.splitlines()[0] if out else 'unknown'


def host_line():
    with open('/proc/meminfo') as handle:
        mem = handle.readline().split(':', 1)[1].strip()
    return '{0} CPUs, {1} RAM, {2}'.format(os.cpu_count(), mem, platform.platform())


if __name__ == '__main__':
    sys.exit(ScaleBench().run())
