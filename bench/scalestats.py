# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure parts of `make bench-scale` (bench/scale_bench.py): recordings, inventories, verdicts, tables, profiles.

No Ansible import, no timing: tests/unit/bench/test_scalestats.py tests every function here on small tables.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import json
import os
import re

# -- recordings ------------------------------------------------------------------------------------------------------


def compile_recording(entries, normalize_command, params_key):
    """One node's recorded connection calls (the lines scale_run.py --record wrote) -> (index, outputs).

    index: {'modules': {fqn: [{'params_key', 'rc', 'stderr', 'stdout_file'}]}, 'commands': {normalized command:
    {'rc', 'stderr', 'stdout_file'}}, 'conflicts': [commands recorded twice with different answers]};
    outputs: {stdout_file: stdout text}. The replay answers a module by its name and arguments, any other command by
    its normalized text.
    """
    index = {'modules': {}, 'commands': {}, 'conflicts': [], 'calls': 0, 'puts': 0}
    outputs = {}
    for entry in entries:
        if entry.get('op') == 'put':
            index['puts'] += 1
            continue
        if entry.get('op') != 'exec':
            continue
        index['calls'] += 1
        name = '{0}.out'.format(len(outputs))
        answer = {'rc': entry['rc'], 'stderr': entry.get('stderr') or '', 'stdout_file': name}
        if entry.get('module'):
            answer['params_key'] = params_key(entry.get('params'))
            index['modules'].setdefault(entry['module'], []).append(answer)
            outputs[name] = entry.get('stdout') or ''
            continue
        norm = normalize_command(entry['cmd'])
        known = index['commands'].get(norm)
        if known is not None:
            # The same command answered otherwise (temporary names, which the replay sets anew, aside).
            if (known['rc'], normalize_command(outputs[known['stdout_file']])) != (
                    entry['rc'], normalize_command(entry.get('stdout') or '')):
                index['conflicts'].append(norm)
            continue
        index['commands'][norm] = answer
        outputs[name] = entry.get('stdout') or ''
    return index, outputs


def read_jsonl(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


# -- inventories -----------------------------------------------------------------------------------------------------


def inventory_hosts(inv):
    """{host: {merged host vars}} and {host: set(groups)} of a YAML inventory's dict (all: hosts/vars/children)."""
    hostvars, groups = {}, {}

    def walk(name, group):
        for host, hvars in ((group or {}).get('hosts') or {}).items():
            hostvars.setdefault(host, {}).update(hvars or {})
            groups.setdefault(host, set()).add(name)
        for child, sub in ((group or {}).get('children') or {}).items():
            walk(child, sub)

    walk('all', inv.get('all') or {})
    return hostvars, groups


def addresses(inv):
    """{ansible_host: host} of an inventory: the recorder names its files by address."""
    hostvars, dummy = inventory_hosts(inv)
    return dict((str(v['ansible_host']), h) for h, v in hostvars.items() if v.get('ansible_host'))


def replica_names(nodes, count):
    """count replay hosts spread round-robin over the recorded nodes: [(replay host, recorded node)]."""
    nodes = sorted(nodes)
    return [('{0}-x{1:04d}'.format(nodes[i % len(nodes)], i + 1), nodes[i % len(nodes)]) for i in range(count)]


def replay_inventory(inv, nodes, count, extra_vars=None):
    """The recorded fleet's inventory with count hosts instead of its nodes.

    Each replay host is in every group its recorded node is in, with the node's own variables and
    bench_replay_node naming it; the inventory's group variables stay as they are; ansible_connection is
    bench_replay for all. Hosts of the inventory that were not recorded are left out.
    """
    out = copy.deepcopy(inv)
    replicas = {}
    for host, node in replica_names(nodes, count):
        replicas.setdefault(node, []).append(host)

    def walk(group):
        if not group:
            return
        hosts = group.get('hosts')
        if hosts is not None:
            new = {}
            for node, hvars in hosts.items():
                for host in replicas.get(node, []):
                    entry = dict(hvars or {})
                    entry['bench_replay_node'] = node
                    new[host] = entry
            group['hosts'] = new
        for sub in (group.get('children') or {}).values():
            walk(sub)

    walk(out.get('all'))
    all_vars = out['all'].setdefault('vars', {})
    all_vars['ansible_connection'] = 'bench_replay'
    all_vars.update(extra_vars or {})
    return out


# -- one run's outcome -----------------------------------------------------------------------------------------------


def run_verdict(callback, playbook):
    """(no-op or not, [why not], facts about the run) from the bench_scale callback's JSON.

    A no-op: every host answered (unreachable 0), nothing changed, nothing failed, and no task of a configuring role
    ran (site.yml: a role's task that ran means a role had work; readiness.yml: only the readiness role runs).
    """
    why = []
    recap = callback.get('recap') or {}
    if not recap:
        why.append('no host ran a task')
    for what in ('changed', 'failures', 'unreachable'):
        hosts = sorted(h for h, r in recap.items() if r.get(what))
        if hosts:
            why.append('{0} on {1} host(s) (first: {2})'.format(what, len(hosts), hosts[0]))
    allowed = {'readiness'} if playbook == 'readiness' else set()
    ran = sorted(set(t['role'] for t in callback.get('tasks') or []
                     if t.get('role') and t['role'].split('.')[-1] not in allowed and (t['ok'] or t['changed'])))
    if ran:
        why.append('tasks of role(s) {0} ran'.format(', '.join(ran)))
    skipped_plays = [p['name'] for p in callback.get('plays') or [] if p.get('no_hosts_matched')]
    slots = sum(t['ok'] + t['changed'] + t['skipped'] + t['failed'] + t['unreachable']
                for t in callback.get('tasks') or [])
    facts = {
        'plays_no_hosts': skipped_plays,
        'plays': len(callback.get('plays') or []),
        'task_results_per_host': round(slots / len(recap), 2) if recap else None,
        'changed_hosts': sum(1 for r in recap.values() if r.get('changed')),
        'failed_hosts': sum(1 for r in recap.values() if r.get('failures')),
        'unreachable_hosts': sum(1 for r in recap.values() if r.get('unreachable')),
    }
    return not why, why, facts


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def kept_sizes(callback):
    """Mean bytes per host of facts, registered values and set_fact values (the callback's sample), with top keys."""
    sizes = (callback or {}).get('sizes') or {}
    per_host = list((sizes.get('per_host') or {}).values())
    return {
        'facts_bytes': mean([h['facts'] for h in per_host]),
        'registered_bytes': mean([h['registered'] for h in per_host]),
        'set_fact_bytes': mean([h['set_fact'] for h in per_host]),
        'shared_bytes': sum(s['bytes'] for s in sizes.get('shared') or []),
        'shared': sizes.get('shared') or [],
        'sampled_hosts': sizes.get('sampled'),
        'top_keys': sizes.get('top_keys'),
        'sizing_cpu_s': sizes.get('cpu_s') or 0.0,
    }


def replay_figures(hosts, stats, callback, playbook):
    """One replayed run's figures (all per host where it says so) from scale_run.py's stats and the callback."""
    sizes = kept_sizes(callback)
    # The callback's sizing runs in the main process at the end: not the playbook's cost, taken out.
    main_cpu = stats['main_user_s'] + stats['main_sys_s'] - sizes['sizing_cpu_s']
    all_cpu = main_cpu + stats['children_user_s'] + stats['children_sys_s']
    noop, why, facts = run_verdict(callback or {}, playbook)
    return {
        'playbook': playbook, 'hosts': hosts, 'rc': stats['rc'], 'wall_s': round(stats['wall_s'], 2),
        'main_cpu_s': round(main_cpu, 2), 'main_user_s': round(stats['main_user_s'], 2),
        'main_sys_s': round(stats['main_sys_s'], 2), 'workers_cpu_s': round(all_cpu - main_cpu, 2),
        'all_cpu_s': round(all_cpu, 2),
        'main_cpu_per_host_ms': round(1000.0 * main_cpu / hosts, 1),
        'all_cpu_per_host_s': round(all_cpu / hosts, 3),
        'main_peak_mb': round(stats['main_maxrss_kb'] / 1024.0, 1),
        'facts_kb_per_host': _kb(sizes['facts_bytes']),
        'registered_kb_per_host': _kb(sizes['registered_bytes']),
        'set_fact_kb_per_host': _kb(sizes['set_fact_bytes']),
        'shared_kb': _kb(sizes['shared_bytes']), 'shared': sizes['shared'],
        'sized_hosts': sizes['sampled_hosts'], 'top_keys': sizes['top_keys'],
        'noop': noop, 'not_noop_because': why, 'run': facts,
    }


def _kb(value):
    return None if value is None else round(value / 1000.0, 1)


def growth(figures, key):
    """{playbook: value at the largest size / value at the smallest} for one per-host key."""
    out = {}
    for playbook in sorted(set(f['playbook'] for f in figures)):
        rows = sorted((f for f in figures if f['playbook'] == playbook and f.get(key)), key=lambda f: f['hosts'])
        if len(rows) >= 2 and rows[0][key]:
            out[playbook] = round(rows[-1][key] / rows[0][key], 2)
    return out


# -- tables ----------------------------------------------------------------------------------------------------------


def _fmt(value, fmt='{0}'):
    return '' if value is None else fmt.format(value)


def replay_table(figures):
    head = ('| run | hosts | wall (forks 50) | main process CPU per host | all controller CPU per host | '
            'main process peak memory | facts kept per host | registered per host | set_fact per host | '
            'one object for all hosts (run_once results) | no-op |')
    rows = [head, '|' + '---|' * 11]
    for f in sorted(figures, key=lambda f: (f['playbook'] != 'site', f['hosts'])):
        rows.append('| {0}.yml | {1} | {2} | {3} | {4} | {5} | {6} | {7} | {8} | {9} | {10} |'.format(
            f['playbook'], f['hosts'], _fmt(f['wall_s'], '{0:.1f} s'), _fmt(f['main_cpu_per_host_ms'], '{0:.0f} ms'),
            _fmt(f['all_cpu_per_host_s'], '{0:.2f} s'), _fmt(f['main_peak_mb'], '{0:.0f} MB'),
            _fmt(f['facts_kb_per_host'], '{0:.1f} kB'), _fmt(f['registered_kb_per_host'], '{0:.1f} kB'),
            _fmt(f['set_fact_kb_per_host'], '{0:.1f} kB'),
            ', '.join('{0} {1:.0f} kB'.format(s['key'], s['bytes'] / 1000.0) for s in f.get('shared') or []),
            'yes' if f['noop'] else 'NO: ' + '; '.join(f['not_noop_because'])))
    return '\n'.join(rows)


def ssh_table(runs):
    head = ('| cold-SSH run (real fleet) | nodes | wall | ssh client CPU per node | ansible processes CPU per node '
            '| the same replayed: all controller CPU per host | main process CPU per node | no-op |')
    rows = [head, '|' + '---|' * 8]
    for r in runs:
        rows.append('| {0}.yml | {1} | {2} | {3} | {4} | {5} | {6} | {7} |'.format(
            r['playbook'], r['hosts'], _fmt(r.get('wall_s'), '{0:.1f} s'),
            _fmt(r.get('ssh_cpu_per_host_s'), '{0:.3f} s'), _fmt(r.get('ansible_cpu_per_host_s'), '{0:.3f} s'),
            _fmt(r.get('replay_all_cpu_per_host_s'), '{0:.3f} s'), _fmt(r.get('main_cpu_per_host_ms'), '{0:.0f} ms'),
            'yes' if r.get('noop') else 'NO: ' + '; '.join(r.get('not_noop_because') or [])))
    return '\n'.join(rows)


# -- profiles (py-spy's raw output: one collapsed stack per line, "frame;frame;... count") ---------------------------

# Where the main process spends its time, by the first of these found in a sample's stack (outermost first within a
# group; groups in this order of precedence): a worker started (fork), a callback sent, a host's variables looked up,
# a template rendered, a result handled.
GROUPS = (
    ('forks', re.compile(r'^(\w+\.)?(start|_launch|__init__) \(.*(multiprocessing/(process|popen_fork)\.py|'
                         r'executor/process/worker\.py)')),
    ('callbacks', re.compile(r'^(\w+\.)?send_callback \(')),
    ('variable lookups (get_vars)', re.compile(r'^(\w+\.)?get_vars \(.*vars/manager\.py')),
    ('templating', re.compile(r'^[\w.<>]+ \(.*ansible/(_internal/_templating/|template/)')),
    ('result handling', re.compile(r'^(\w+\.)?(_process_pending_results|_wait_on_pending_results|'
                                   r'results_thread_main) \(')),
)
FRAME = re.compile(r'^(?P<func>[^ ]+) \((?P<file>[^:]+)(?::(?P<line>\d+))?\)$')


def parse_collapsed(text):
    """[(frames outermost first, count)] of py-spy's raw format."""
    stacks = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        body, dummy, count = line.rpartition(' ')
        try:
            stacks.append((body.split(';'), int(count)))
        except ValueError:
            continue
    return stacks


def short_frame(frame):
    """'get_vars (ansible/vars/manager.py:123)' -> 'get_vars (ansible/vars/manager.py)': one entry per function."""
    found = FRAME.match(frame)
    if not found:
        return frame
    path = found.group('file')
    for marker in ('site-packages/', 'lib/python'):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return '{0} ({1})'.format(found.group('func'), path)


def group_of(frames):
    for name, pattern in GROUPS:
        for frame in frames:
            if pattern.search(short_frame(frame)):
                return name
    return 'other'


def profile_summary(stacks, top=60):
    """{'samples', 'groups': [(group, share)], 'cumulative': [(function, share, group)], 'own': [(function, share,
    group of its stack)]} of collapsed stacks (own: the sample's innermost frame)."""
    total = sum(c for dummy, c in stacks) or 1
    groups, cumulative, own = {}, {}, {}
    for frames, count in stacks:
        g = group_of(frames)
        groups[g] = groups.get(g, 0) + count
        for f in set(short_frame(f) for f in frames):
            cumulative[f] = cumulative.get(f, 0) + count
        leaf = (short_frame(frames[-1]), g)
        own[leaf] = own.get(leaf, 0) + count
    order = sorted(cumulative.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    leaves = sorted(own.items(), key=lambda kv: (-kv[1], kv[0]))[:top // 2]
    return {
        'samples': total,
        'groups': sorted(((g, round(c / total, 3)) for g, c in groups.items()), key=lambda gc: -gc[1]),
        'cumulative': [(f, round(c / total, 3), group_of([f])) for f, c in order],
        'own': [(f, round(c / total, 3), g) for (f, g), c in leaves],
    }


def profile_text(title, summary):
    lines = [title, '', 'samples: {0} (py-spy, main process only, every thread)'.format(summary['samples']), '',
             'share of samples by group (each sample counted once, in the first group found in its stack):']
    for g, share in summary['groups']:
        lines.append('  {0:>6.1%}  {1}'.format(share, g))
    lines += ['', 'top functions by cumulative share (a sample counts for every function on its stack):']
    for f, share, g in summary['cumulative']:
        lines.append('  {0:>6.1%}  {1}{2}'.format(share, f, '' if g == 'other' else '   [' + g + ']'))
    lines += ['', 'top functions by own share (the innermost frame of a sample; [the group of its stack]):']
    for f, share, g in summary.get('own') or []:
        lines.append('  {0:>6.1%}  {1}   [{2}]'.format(share, f, g))
    return '\n'.join(lines) + '\n'


def write_text(path, text):
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as handle:
        handle.write(text)
    os.rename(tmp, path)
