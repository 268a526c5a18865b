# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Statistics and result files of `make bench` (pure functions, no Ansible import; unit-tested).

A measure is a list of samples (one per repeat). It is summarised as its median and its spread (max - min), with
min, max and the sample count. latest.json holds `runs`: one object per fleet size, with each measure's median under
its own name (noop_site_s, gather_s, ratio, ...) and the rest under `<name>_spread`, `<name>_min`, `<name>_max`,
`<name>_n`, plus a `measures` table used to print and render the results.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

# Measure name -> (label, unit). The order is the order of the printed table.
MEASURES = (
    ('noop_site_s', 'no-op site.yml', 's'),
    ('gather_s', 'bare gpu_node_facts gather', 's'),
    ('ratio', 'no-op site / gather', 'x'),
    ('module_execs_per_host', 'remote module executions per host (no-op site)', ''),
    ('skipped_per_host', 'skipped task results per host (no-op site)', ''),
    ('nvidia_smi_calls_per_gather', 'nvidia-smi calls per host per gather', ''),
    ('nvidia_smi_calls_per_noop', 'nvidia-smi calls per host per no-op site', ''),
    ('controller_cpu_s', 'controller CPU of the no-op site.yml (user + system, ansible-playbook and children)', 's'),
    ('controller_cpu_gather_s', 'controller CPU of the bare gather', 's'),
    ('controller_cpu_per_node_s', 'controller CPU per node beyond the gather ((site - gather) / nodes)', 's'),
    ('baseline_noop_s', 'baseline no-op (bench/baseline)', 's'),
    ('baseline_module_execs_per_host', 'baseline remote module executions per host', ''),
    ('baseline_over_site', 'baseline no-op / no-op site', 'x'),
    ('noop_site_pipelining_s', 'no-op site, ssh pipelining on', 's'),
    ('noop_site_forks_s', 'no-op site, forks = fleet size', 's'),
    ('noop_site_fact_cache_s', 'no-op site, jsonfile fact cache + gathering=smart', 's'),
    ('noop_site_mitogen_s', 'no-op site, Mitogen (mitogen_linear)', 's'),
)
REQUIRED = ('nodes', 'noop_site_s', 'gather_s', 'ratio', 'module_execs_per_host', 'nvidia_smi_calls_per_gather',
            'baseline_noop_s')


def median(values):
    """Median of the numbers in values (None entries ignored); None when there is none."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    if len(vals) % 2:
        return vals[mid]
    return (vals[mid - 1] + vals[mid]) / 2.0


def summarize(values):
    """{'median', 'min', 'max', 'spread', 'n'} of a list of samples; every number None when there is no sample."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {'median': None, 'min': None, 'max': None, 'spread': None, 'n': 0}
    return {'median': median(vals), 'min': min(vals), 'max': max(vals), 'spread': max(vals) - min(vals),
            'n': len(vals)}


def ratios(numerators, denominators):
    """Per-repeat ratios of paired samples (a pair with a missing or zero denominator is left out)."""
    out = []
    for num, den in zip(numerators, denominators):
        if num is not None and den:
            out.append(num / den)
    return out


def per_host_counts(counter, key='module_execs'):
    """Median over hosts of one per-host count from a bench_counter result; None when the run has no host."""
    hosts = (counter or {}).get('hosts') or {}
    return median([h.get(key, 0) for h in hosts.values()])


def count_deltas(before, after):
    """Per-host call-log growth: {host: after - before}, only for hosts where both counts are known and the log did
    not shrink (a reboot empties /run, where the GPU double keeps it)."""
    out = {}
    for host, count in (after or {}).items():
        if count is not None and (before or {}).get(host) is not None and count >= before[host]:
            out[host] = count - before[host]
    return out


def call_log_counts(text):
    """{host: lines in the GPU double's call log, or None} from the ansible.posix.json output of the ad-hoc
    `raw` command that prints `wc -l < log` or `absent`; {} when the output is not that JSON."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    out = {}
    for play in data.get('plays', []) if isinstance(data, dict) else []:
        for task in play.get('tasks', []):
            for host, res in task.get('hosts', {}).items():
                words = (res.get('stdout') or '').split()
                out[host] = int(words[-1]) if words and words[-1].isdigit() else None
    return out


def _round(value, digits=3):
    return None if value is None else round(value, digits)


def build_run(nodes, samples, notes=None):
    """One `runs` entry: samples maps measure name -> list of samples; ratio and baseline_over_site are derived."""
    samples = dict(samples)
    if 'ratio' not in samples:
        samples['ratio'] = ratios(samples.get('noop_site_s', []), samples.get('gather_s', []))
    if 'controller_cpu_per_node_s' not in samples:
        samples['controller_cpu_per_node_s'] = [
            None if site is None or gather is None else (site - gather) / float(nodes)
            for site, gather in zip(samples.get('controller_cpu_s', []), samples.get('controller_cpu_gather_s', []))]
    if 'baseline_over_site' not in samples:
        samples['baseline_over_site'] = ratios(samples.get('baseline_noop_s', []), samples.get('noop_site_s', []))
    run = {'nodes': nodes, 'measures': []}
    for name, label, unit in MEASURES:
        stats = summarize(samples.get(name, []))
        run[name] = _round(stats['median'])
        for key in ('spread', 'min', 'max'):
            run['{0}_{1}'.format(name, key)] = _round(stats[key])
        run[name + '_n'] = stats['n']
        run['measures'].append({'name': name, 'label': label, 'unit': unit, 'median': run[name],
                                'spread': run[name + '_spread'], 'n': stats['n'],
                                'samples': [_round(v) for v in samples.get(name, []) if v is not None]})
    run['notes'] = list(notes or [])
    return run


def check_run(run):
    """The keys latest.json promises for every run; returns the missing ones (an empty list when complete)."""
    return [key for key in REQUIRED if key not in run]


def _fmt(value, unit):
    if value is None:
        return 'n/a'
    if unit == 's':
        return '{0:.2f} s'.format(value)
    if unit == 'x':
        return '{0:.2f}x'.format(value)
    if float(value).is_integer():
        return '{0:d}'.format(int(value))
    return '{0:.2f}'.format(value)


def table_rows(runs):
    """Rows (fleet size, measure, median, spread, n) of every measure that has at least one sample."""
    rows = []
    for run in runs:
        for m in run['measures']:
            if m['n'] == 0:
                continue
            rows.append(('{0} nodes'.format(run['nodes']), m['label'], _fmt(m['median'], m['unit']),
                         _fmt(m['spread'], m['unit']), str(m['n'])))
    return rows


def format_table(runs):
    """The table `make bench` prints: fixed-width text, one line per (fleet size, measure)."""
    head = ('fleet', 'measure', 'median', 'spread', 'n')
    rows = [head] + table_rows(runs)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = []
    for i, row in enumerate(rows):
        lines.append('  '.join(cell.ljust(widths[j]) if j < 2 else cell.rjust(widths[j])
                               for j, cell in enumerate(row)).rstrip())
        if i == 0:
            lines.append('  '.join('-' * w for w in widths))
    return '\n'.join(lines)


def to_markdown(doc):
    """latest.md: the conditions, the table, the notes and the slowest tasks of the no-op run."""
    cond = doc.get('conditions', {})
    out = ['# `make bench` results', '', 'Generated by `bench/fleet_bench.py`; timings depend on the machine and its '
           'load (see the conditions). Spread = max - min over the repeats.', '', '## Conditions', '']
    for key in sorted(cond):
        out.append('- {0}: {1}'.format(key, cond[key] if not isinstance(cond[key], (dict, list))
                                       else json.dumps(cond[key], sort_keys=True)))
    out += ['', '## Results', '', '| fleet | measure | median | spread | n |', '|---|---|---|---|---|']
    for row in table_rows(doc.get('runs', [])):
        out.append('| ' + ' | '.join(row) + ' |')
    for run in doc.get('runs', []):
        if run.get('notes'):
            out += ['', '### Notes, {0} nodes'.format(run['nodes']), '']
            out += ['- ' + n for n in run['notes']]
        prof = run.get('profile')
        if prof:
            out += ['', '### Profile of one no-op site.yml run, {0} nodes'.format(run['nodes']), '',
                    'Task results per host: {0} ran a module, {1} skipped, {2} controller-only; '
                    'actions that ran: {3}.'.format(prof['module_execs_per_host'], prof['skipped_per_host'],
                                                    prof['controller_only_per_host'],
                                                    ', '.join('{0} x{1}'.format(a, c) for a, c in
                                                              prof['actions_per_host'])),
                    '', '| task | action | hosts ran | hosts skipped | seconds (all hosts) |', '|---|---|---|---|---|']
            for t in prof['slowest']:
                out.append('| {0} | {1} | {2} | {3} | {4:.2f} |'.format(
                    t['name'].replace('|', '/'), t['action'], t['ran'], t['skipped'], t['total_s']))
    return '\n'.join(out) + '\n'


def profile(counter, top=25):
    """Summary of one bench_counter result: per-host counts, and the top tasks by summed duration over hosts."""
    hosts = (counter or {}).get('hosts') or {}
    tasks = (counter or {}).get('tasks') or []
    actions = {}
    for h in hosts.values():
        for action, count in h.get('actions', {}).items():
            actions.setdefault(action, []).append(count)
    per_host = sorted(((a, median(c)) for a, c in actions.items()), key=lambda x: (-x[1], x[0]))
    slow = sorted(tasks, key=lambda t: -t.get('total_s', 0))[:top]
    return {
        'hosts': len(hosts),
        'task_slots': len(tasks),
        'module_execs_per_host': per_host_counts(counter, 'module_execs'),
        'skipped_per_host': per_host_counts(counter, 'skipped'),
        'controller_only_per_host': per_host_counts(counter, 'controller_only'),
        'skipped_s': round(sum(sum(t['seconds'].get(h, 0) for h in t.get('skipped', [])) for t in tasks), 3),
        'ran_s': round(sum(sum(t['seconds'].get(h, 0) for h in t.get('ran', {})) for t in tasks), 3),
        'actions_per_host': per_host,
        'slowest': [{'name': t['name'], 'action': t['action'], 'ran': len(t.get('ran', {})),
                     'skipped': len(t.get('skipped', [])), 'total_s': t.get('total_s', 0)} for t in slow],
    }


def write_results(doc, json_path, md_path):
    """Write latest.json and latest.md (folders created); returns the two paths."""
    for path in (json_path, md_path):
        folder = os.path.dirname(path)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder)
    with open(json_path, 'w') as handle:
        json.dump(doc, handle, indent=2, sort_keys=True)
        handle.write('\n')
    with open(md_path, 'w') as handle:
        handle.write(to_markdown(doc))
    return json_path, md_path
