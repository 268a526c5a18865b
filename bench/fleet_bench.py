# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fleet benchmark behind `make bench` (root; not a test: nothing in `make test` depends on it).

For each fleet size in BENCH_SIZES (default "4 16 32", sizes the memory cannot hold are skipped and said so):
bring the simulated fleet up, converge it once with the bench overlay (power limit "70%", locked clocks, /etc/nccl.conf,
NIC offloads on the NCCL interface), converge the baseline (bench/baseline/checklist.yml) once, check that both are
no-ops now, then measure BENCH_REPEATS times (default 3): the no-op site.yml, a bare gpu_node_facts gather, the
baseline's no-op, the remote module executions per host (bench/callback_plugins/bench_counter.py) and the nvidia-smi
calls per host (the GPU double's call log, BENCH_NVSMI_LOG); then the variants in BENCH_VARIANTS (default
"pipelining forks mitogen fact_cache"). Writes bench/results/latest.json and latest.md and prints the table.

Environment: BENCH_SIZES, BENCH_REPEATS, BENCH_VARIANTS, BENCH_KEEP=1 (leave the fleet up), BENCH_NODE_MB (memory a
node needs, default 300), BENCH_OUT (folder of the result files, default bench/results), BENCH_NVSMI_LOG (default
/run/gpu-double/calls.log), BENCH_MITOGEN_VERSION (default: the newest on the package index), and the testbed's own
TESTBED_PREFIX / TESTBED_SUBNET (give your own when another fleet runs on this machine).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import fleetstats  # noqa: E402  pylint: disable=wrong-import-position

BIN = os.path.dirname(sys.executable)
WORK = os.path.join(ROOT, '.tmp', 'bench')
# The testbed writes its inventory into its state folder (TESTBED_DIR, default .testbed/): a bench beside another fleet
# must measure its own nodes, never an empty or foreign inventory.
INVENTORY = os.path.join(os.environ.get('TESTBED_DIR') or os.path.join(ROOT, '.testbed'), 'inventory.yml')
OVERLAY = os.path.join(WORK, 'overlay.yml')
SITE = os.path.join(ROOT, 'playbooks', 'site.yml')
GATHER = os.path.join(HERE, 'gather.yml')
BASELINE = os.path.join(HERE, 'baseline', 'checklist.yml')
DEFAULT_FORKS = 5  # ansible-core's own default


def log(msg):
    print('bench: ' + msg, flush=True)


def loadavg():
    with open('/proc/loadavg') as handle:
        return handle.read().split()[:3]


def env_list(name, default):
    return (os.environ.get(name) or default).split()


def overlay_vars(subnet):
    """What the article asks for, as inventory variables of the collection's roles (the bench overlay)."""
    net = '{0}.0.0/16'.format(subnet)
    return {
        'all': {
            'vars': {
                'nodeprep_gpu_settings_power_limit': '70%',
                'nodeprep_nccl_conf': {'NCCL_IB_TIMEOUT': 22, 'NCCL_DEBUG': 'WARN'},
                'nodeprep_nccl_socket_networks': [net],
                'nodeprep_nic_offload_features': {'gro': False, 'lro': False},
                'nodeprep_nic_offload_networks': [net],
                'nodeprep_nic_offload_ignore_fixed': True,
            },
            'children': {
                'gpu_b200': {'vars': {'nodeprep_gpu_settings_locked_gpu_clocks': {'min': 1500, 'max': 1965}}},
                'gpu_h100': {'vars': {'nodeprep_gpu_settings_locked_gpu_clocks': {'min': 1500, 'max': 1980}}},
                'gpu_h200': {'vars': {'nodeprep_gpu_settings_locked_gpu_clocks': {'min': 1500, 'max': 1980}}},
            },
        },
    }


class Bench(object):
    def __init__(self):
        self.sizes = [int(s) for s in env_list('BENCH_SIZES', '4 16 32')]
        self.repeats = int(os.environ.get('BENCH_REPEATS') or 3)
        self.variants = env_list('BENCH_VARIANTS', 'pipelining forks mitogen fact_cache')
        self.keep = os.environ.get('BENCH_KEEP') == '1'
        self.node_mb = int(os.environ.get('BENCH_NODE_MB') or 300)
        self.out = os.environ.get('BENCH_OUT') or os.path.join(HERE, 'results')
        self.nvsmi_log = os.environ.get('BENCH_NVSMI_LOG') or '/run/gpu-double/calls.log'
        self.subnet = os.environ.get('TESTBED_SUBNET') or '10.231'
        self.logs = os.path.join(WORK, 'logs')
        self.mitogen = None
        self.doc = {'conditions': {}, 'runs': [], 'skipped_sizes': []}
        self.partial = None
        self.env = dict(os.environ)
        purelib = subprocess.check_output([sys.executable, '-c',
                                           'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                                          universal_newlines=True).strip()
        self.env.update({
            'ANSIBLE_COLLECTIONS_PATH': '{0}:{1}'.format(os.path.join(ROOT, '.tmp', 'collections'), purelib),
            'ANSIBLE_COLLECTIONS_SCAN_SYS_PATH': 'false',
            'ANSIBLE_NOCOLOR': '1',
            'ANSIBLE_RETRY_FILES_ENABLED': 'false',
            # Explicit, so an ansible.cfg in the checkout cannot change what the base measures mean.
            'ANSIBLE_PIPELINING': 'False',
            'ANSIBLE_FORKS': str(DEFAULT_FORKS),
        })

    # -- running things ------------------------------------------------------------------------------------------
    def testbed(self, *args):
        cmd = [sys.executable, os.path.join(ROOT, 'tests', 'testbed', 'testbed.py')] + list(args)
        log(' '.join(cmd[1:]))
        subprocess.check_call(cmd, cwd=ROOT, env=self.env)

    def playbook(self, tag, playbook, extra_env=None, extra_args=None):
        """Run one playbook with the bench counter on; returns (seconds, rc, counter data)."""
        counter_out = os.path.join(self.logs, tag + '.counter.json')
        if os.path.exists(counter_out):
            os.remove(counter_out)
        env = dict(self.env)
        env.update({'ANSIBLE_CALLBACKS_ENABLED': 'bench_counter',
                    'ANSIBLE_CALLBACK_PLUGINS': os.path.join(HERE, 'callback_plugins'),
                    'BENCH_COUNTER_OUT': counter_out})
        env.update(extra_env or {})
        cmd = [os.path.join(BIN, 'ansible-playbook'), '-i', INVENTORY, '-i', OVERLAY, playbook] + list(extra_args or [])
        with open(os.path.join(self.logs, tag + '.log'), 'w') as handle:
            start = time.monotonic()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            seconds = time.monotonic() - start
        # ansible-playbook and the children it waited for (workers, ssh clients); the nodes' processes are not its
        # children (the testbed's runners start them).
        self.last_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        counter = None
        if os.path.exists(counter_out):
            with open(counter_out) as handle:
                counter = json.load(handle)
        log('{0}: {1:.1f} s, {2:.1f} s CPU, rc={3}, changed={4}'.format(
            tag, seconds, self.last_cpu, rc, self.changed_hosts(counter)))
        if not (counter or {}).get('hosts'):
            # A run that reached no node measures Python start-up, not the collection: stop rather than record it.
            raise SystemExit('bench: {0}: no host ran a task (inventory {1}; log {2})'.format(
                tag, INVENTORY, os.path.join(self.logs, tag + '.log')))
        return seconds, rc, counter

    @staticmethod
    def changed_hosts(counter):
        hosts = (counter or {}).get('hosts') or {}
        return {h: c['changed'] for h, c in sorted(hosts.items()) if c.get('changed') or c.get('failed')}

    @staticmethod
    def changed_tasks(counter):
        return sorted(set('{0} ({1})'.format(t['name'], ','.join(t['changed']))
                          for t in (counter or {}).get('tasks', []) if t.get('changed')))

    def nvsmi_counts(self):
        """Lines in the GPU double's nvidia-smi call log on every node: {host: count or None when absent}."""
        env = dict(self.env)
        env.update({'ANSIBLE_STDOUT_CALLBACK': 'ansible.posix.json', 'ANSIBLE_LOAD_CALLBACK_PLUGINS': '1'})
        script = 'if [ -r {0} ]; then wc -l < {0}; else echo absent; fi'.format(self.nvsmi_log)
        cmd = [os.path.join(BIN, 'ansible'), 'all', '-i', INVENTORY, '-m', 'raw', '-a', script]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              universal_newlines=True, check=False)
        return fleetstats.call_log_counts(proc.stdout)

    # -- Mitogen -------------------------------------------------------------------------------------------------
    def setup_mitogen(self):
        """Install Mitogen into .tmp/bench/mitogen (never into the project's virtualenv); returns env or a reason."""
        target = os.path.join(WORK, 'mitogen')
        version = os.environ.get('BENCH_MITOGEN_VERSION')
        spec = 'mitogen==' + version if version else 'mitogen'
        if not os.path.isdir(os.path.join(target, 'ansible_mitogen')):
            proc = subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--disable-pip-version-check',
                                   '--no-deps', '--target', target, spec], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, universal_newlines=True, check=False)
            if proc.returncode:
                return None, 'pip install {0} failed: {1}'.format(spec, proc.stdout.strip()[-300:])
        dist = [d for d in os.listdir(target) if d.startswith('mitogen-') and d.endswith('.dist-info')]
        self.mitogen = dist[0][len('mitogen-'):-len('.dist-info')] if dist else 'unknown'
        env = {'PYTHONPATH': target + os.pathsep + os.environ.get('PYTHONPATH', ''),
               'ANSIBLE_STRATEGY_PLUGINS': os.path.join(target, 'ansible_mitogen', 'plugins', 'strategy'),
               'ANSIBLE_STRATEGY': 'mitogen_linear',
               # Mitogen opens its own ssh connections and does not read the testbed's ansible_ssh_common_args
               # (StrictHostKeyChecking=no, the nodes share one host key): without this every node is unreachable.
               'ANSIBLE_HOST_KEY_CHECKING': 'False'}
        return env, None

    # -- one fleet size ------------------------------------------------------------------------------------------
    def memory_ok(self, nodes):
        with open('/proc/meminfo') as handle:
            info = dict(line.split(':', 1) for line in handle)
        avail_mb = int(info['MemAvailable'].split()[0]) // 1024
        need = nodes * self.node_mb + 1024
        return avail_mb >= need, 'needs about {0} MiB ({1} x {2} + 1024), {3} MiB available'.format(
            need, nodes, self.node_mb, avail_mb)

    def write_overlay(self):
        import yaml  # the virtualenv has PyYAML (ansible-core needs it)
        os.makedirs(WORK, exist_ok=True)
        with open(OVERLAY, 'w') as handle:
            handle.write('# Written by bench/fleet_bench.py: what the article asks, for the bench runs only.\n')
            yaml.safe_dump(overlay_vars(self.subnet), handle, default_flow_style=False, sort_keys=True)

    def measure_size(self, nodes):
        notes = []
        samples = {}

        def add(name, value):
            samples.setdefault(name, []).append(value)

        self.testbed('up', '--nodes', str(nodes))
        # Converge both, then check both: the baseline shares files with the roles (/etc/nccl.conf, fstab), so the
        # site's no-op is checked after the baseline's converge. A converge that changed nothing is its own check.
        converged = {}
        # The converge is not measured: every node at once through the kernel/driver play (the default 10% is one
        # node per batch below 20 nodes, about 3 minutes a node here). The measured no-op runs keep the default.
        for what, playbook, args in (('converge', SITE, ['-e', 'nodeprep_disruptive_serial=100%']),
                                     ('baseline-converge', BASELINE, [])):
            sec, rc, counter = self.playbook('{0}-{1}'.format(nodes, what), playbook, extra_args=args)
            converged[what] = not rc and not self.changed_hosts(counter)
            notes.append('{0}: {1:.0f} s, rc={2}, changed hosts: {3}'.format(
                what, sec, rc, self.changed_hosts(counter) or 'none'))
        for what, playbook in (('site-check', SITE), ('baseline-check', BASELINE)):
            if converged['converge'] and converged['baseline-converge']:
                break
            sec, rc, counter = self.playbook('{0}-{1}'.format(nodes, what), playbook)
            if rc or self.changed_hosts(counter):
                notes.append('{0}: NOT a no-op after the converge (rc={1}); changed: {2}'.format(
                    what, rc, '; '.join(self.changed_tasks(counter)) or 'none'))
        self.checkpoint(nodes, samples, notes)

        log_seen = None
        for i in range(self.repeats):
            before = self.nvsmi_counts()
            sec, rc, counter = self.playbook('{0}-noop-site-{1}'.format(nodes, i), SITE)
            after = self.nvsmi_counts()
            self.check_noop(notes, 'no-op site.yml', i, rc, counter)
            add('noop_site_s', sec)
            add('controller_cpu_s', self.last_cpu)
            add('module_execs_per_host', fleetstats.per_host_counts(counter, 'module_execs'))
            add('skipped_per_host', fleetstats.per_host_counts(counter, 'skipped'))
            add('nvidia_smi_calls_per_noop', fleetstats.median(list(fleetstats.count_deltas(before, after).values())))
            if i == 0:
                samples['_profile'] = fleetstats.profile(counter)
            before = after
            sec, rc, counter = self.playbook('{0}-gather-{1}'.format(nodes, i), GATHER)
            after = self.nvsmi_counts()
            self.check_noop(notes, 'gather', i, rc, counter)
            add('gather_s', sec)
            add('controller_cpu_gather_s', self.last_cpu)
            deltas = fleetstats.count_deltas(before, after)
            log_seen = bool(deltas) if log_seen is None else (log_seen or bool(deltas))
            add('nvidia_smi_calls_per_gather', fleetstats.median(list(deltas.values())))
            sec, rc, counter = self.playbook('{0}-baseline-noop-{1}'.format(nodes, i), BASELINE)
            self.check_noop(notes, 'baseline no-op', i, rc, counter)
            add('baseline_noop_s', sec)
            add('baseline_module_execs_per_host', fleetstats.per_host_counts(counter, 'module_execs'))
        self.checkpoint(nodes, samples, notes)
        if not log_seen:
            notes.append('nvidia-smi calls not counted: no node has the GPU double call log {0} (a double from '
                         'before the call log, or BENCH_NVSMI_LOG names another path)'.format(self.nvsmi_log))

        for variant in self.variants:
            self.measure_variant(nodes, variant, notes, add)
            self.checkpoint(nodes, samples, notes)
        return self.make_run(nodes, samples, notes)

    @staticmethod
    def make_run(nodes, samples, notes):
        samples = dict(samples)
        prof = samples.pop('_profile', None)
        run = fleetstats.build_run(nodes, samples, notes)
        run['profile'] = prof
        return run

    def checkpoint(self, nodes, samples, notes):
        """Save what this fleet size measured so far (an interrupted bench keeps it)."""
        self.partial = self.make_run(nodes, samples, notes + ['partial: the bench stopped while measuring this size'])
        self.save(dict(self.doc, runs=self.doc['runs'] + [self.partial]))

    def check_noop(self, notes, what, i, rc, counter):
        changed = self.changed_hosts(counter)
        if rc or changed:
            notes.append('{0} run {1}: rc={2}, changed/failed hosts {3}: {4}'.format(
                what, i, rc, changed, '; '.join(self.changed_tasks(counter))))

    def measure_variant(self, nodes, variant, notes, add):
        if variant == 'pipelining':
            extra, name = {'ANSIBLE_PIPELINING': 'True'}, 'noop_site_pipelining_s'
        elif variant == 'forks':
            if nodes <= DEFAULT_FORKS:
                notes.append('forks: not measured, the default forks={0} already covers {1} nodes'.format(
                    DEFAULT_FORKS, nodes))
                return
            extra, name = {'ANSIBLE_FORKS': str(nodes)}, 'noop_site_forks_s'
        elif variant == 'fact_cache':
            extra = {'ANSIBLE_CACHE_PLUGIN': 'ansible.builtin.jsonfile', 'ANSIBLE_GATHERING': 'smart',
                     'ANSIBLE_CACHE_PLUGIN_CONNECTION': os.path.join(WORK, 'factcache-{0}'.format(nodes))}
            name = 'noop_site_fact_cache_s'
            self.playbook('{0}-fact-cache-warm'.format(nodes), SITE, extra)
        elif variant == 'mitogen':
            extra, reason = self.setup_mitogen()
            name = 'noop_site_mitogen_s'
            if extra is None:
                notes.append('Mitogen: not measured: ' + reason)
                return
        else:
            notes.append('unknown variant {0!r} ignored'.format(variant))
            return
        for i in range(self.repeats):
            sec, rc, counter = self.playbook('{0}-{1}-{2}'.format(nodes, variant, i), SITE, extra)
            if rc:
                notes.append('{0} run {1} failed (rc={2}), not counted; see .tmp/bench/logs/{3}-{0}-{1}.log'.format(
                    variant, i, rc, nodes))
                if variant == 'mitogen':
                    notes.append('Mitogen {0}: {1}'.format(self.mitogen, self.tail('{0}-{1}-{2}'.format(
                        nodes, variant, i))))
                    return
                continue
            self.check_noop(notes, variant, i, rc, counter)
            add(name, sec)

    def tail(self, tag):
        try:
            with open(os.path.join(self.logs, tag + '.log')) as handle:
                lines = [l.strip() for l in handle if l.strip()]
        except OSError:
            return ''
        errors = [l for l in lines if 'ERROR' in l or 'Error' in l]
        return (errors or lines)[-1][:300] if lines else ''

    # -- the whole thing -----------------------------------------------------------------------------------------
    def conditions(self):
        cfg = subprocess.run([os.path.join(BIN, 'ansible-config'), 'dump', '--only-changed'], cwd=ROOT, env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                             check=False).stdout
        core = subprocess.run([os.path.join(BIN, 'ansible'), '--version'], stdout=subprocess.PIPE,
                              universal_newlines=True, check=False).stdout.splitlines()[0]
        commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, universal_newlines=True, check=False).stdout.strip()
        dirty = subprocess.run(['git', 'status', '--porcelain'], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, universal_newlines=True, check=False).stdout.strip()
        with open('/proc/meminfo') as handle:
            mem = handle.readline().split(':', 1)[1].strip()
        return {
            'date_utc': datetime.datetime.utcnow().strftime('%Y-%m-%dT%H:%M:%SZ'),
            'commit': commit + (' (with uncommitted changes)' if dirty else ''),
            'host': '{0} CPUs, {1} RAM, {2}'.format(os.cpu_count(), mem, platform.platform()),
            'loadavg_start': loadavg(),
            'ansible': core,
            'sizes_asked': self.sizes, 'repeats': self.repeats, 'variants': self.variants,
            'base_settings': 'pipelining off, forks {0}, linear strategy, ssh ControlPersist as ansible-core '
                             'sets it (connections reused between runs)'.format(DEFAULT_FORKS),
            'ansible_config_changed': [l for l in cfg.splitlines() if l.strip()],
            'overlay': overlay_vars(self.subnet),
            'nvidia_smi_log': self.nvsmi_log,
        }

    def run(self):
        if os.geteuid() != 0:
            log('needs root (the simulated fleet uses namespaces and systemd-nspawn)')
            return 2
        os.makedirs(self.logs, exist_ok=True)
        self.write_overlay()
        doc = self.doc = {'conditions': self.conditions(), 'runs': [], 'skipped_sizes': []}
        try:
            for nodes in self.sizes:
                ok, why = self.memory_ok(nodes)
                if not ok:
                    log('{0} nodes skipped: {1}'.format(nodes, why))
                    doc['skipped_sizes'].append({'nodes': nodes, 'reason': why})
                    continue
                doc['runs'].append(self.measure_size(nodes))
                self.partial = None
                self.save(doc)
        finally:
            if self.partial:
                doc['runs'].append(self.partial)
            doc['conditions']['loadavg_end'] = loadavg()
            if self.mitogen:
                doc['conditions']['mitogen'] = self.mitogen
            self.save(doc)
            if not self.keep:
                self.testbed('down')
        print(fleetstats.format_table(doc['runs']))
        for skipped in doc['skipped_sizes']:
            print('{0} nodes: skipped ({1})'.format(skipped['nodes'], skipped['reason']))
        return 0

    def save(self, doc):
        paths = fleetstats.write_results(doc, os.path.join(self.out, 'latest.json'),
                                         os.path.join(self.out, 'latest.md'))
        log('wrote ' + ', '.join(os.path.relpath(p, ROOT) for p in paths))


if __name__ == '__main__':
    sys.exit(Bench().run())
