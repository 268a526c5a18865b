# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bench-only callback of `make bench-scale`: what a run left in the controller's memory per host, and its outcome.

Enabled only by bench/scale_bench.py (ANSIBLE_CALLBACKS_ENABLED=bench_scale, ANSIBLE_CALLBACK_PLUGINS=bench/
callback_plugins); writes JSON to $BENCH_SCALE_OUT when the playbook ends. Not part of the collection.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = '''
    name: bench_scale
    type: aggregate
    short_description: sizes the facts and variables kept per host, records the run's outcome (bench only)
    description:
      - At the end of the playbook, in the controller's main process, measures per host the JSON size of the facts
        in the VariableManager's fact cache and of the set_fact and registered values in its non-persistent cache
        (on an even sample of BENCH_SCALE_SAMPLE hosts, default 40), with the largest keys; a value several hosts
        hold as one object (a run_once task's registered result) is sized once, apart.
      - Records each host's recap, each play's matched hosts and each task's results by status, and writes it all
        as JSON to the file named by BENCH_SCALE_OUT.
    requirements:
      - enable in the callbacks_enabled list
'''

import json
import os
import time

from ansible.plugins.callback import CallbackBase


def json_size(value):
    """Bytes of value as compact JSON (what is not JSON, such as a tagged or undefined value, as its text)."""
    return len(json.dumps(value, separators=(',', ':'), default=str, ensure_ascii=False).encode('utf-8'))


def even_sample(items, count):
    """At most count items of items, evenly spaced, first and last included."""
    items = list(items)
    if count <= 0 or len(items) <= count:
        return items
    if count == 1:
        return items[:1]
    step = (len(items) - 1) / (count - 1)
    return [items[int(round(i * step))] for i in range(count)]


def sizes_of(mapping):
    """{key: bytes} of a host's cache entry."""
    return dict((str(k), json_size(v)) for k, v in (mapping or {}).items())


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'bench_scale'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.out = os.environ.get('BENCH_SCALE_OUT')
        self.sample = int(os.environ.get('BENCH_SCALE_SAMPLE') or 40)
        self.vm = None
        self.plays = []
        self.tasks = {}
        self.task_order = []
        self.registered = set()

    def v2_playbook_on_play_start(self, play):
        self.vm = play.get_variable_manager() or self.vm
        self.plays.append({'name': play.get_name(), 'hosts': set(), 'no_hosts_matched': False})

    def v2_playbook_on_no_hosts_matched(self):
        if self.plays:
            self.plays[-1]['no_hosts_matched'] = True

    def v2_playbook_on_task_start(self, task, is_conditional):
        # ansible-core 2.21 keeps `register` as {name: projection}; older releases as the name.
        register = task.register
        if isinstance(register, dict):
            self.registered.update(str(k) for k in register)
        elif register:
            self.registered.add(str(register))

    def _task(self, result):
        task = result._task
        key = task._uuid
        if key not in self.tasks:
            role = task._role.get_name() if task._role else None
            self.tasks[key] = {'name': task.get_name(), 'action': task.action, 'role': role,
                               'play': len(self.plays) - 1, 'ok': 0, 'changed': 0, 'skipped': 0, 'failed': 0,
                               'unreachable': 0}
            self.task_order.append(key)
        if self.plays:
            self.plays[-1]['hosts'].add(result._host.get_name())
        return self.tasks[key]

    def v2_runner_on_ok(self, result):
        # is_changed(), not the result dict: this callback converts no result for itself.
        self._task(result)['changed' if result.is_changed() else 'ok'] += 1

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._task(result)['failed'] += 1

    def v2_runner_on_skipped(self, result):
        self._task(result)['skipped'] += 1

    def v2_runner_on_unreachable(self, result):
        self._task(result)['unreachable'] += 1

    def _sizes(self):
        """Per sampled host: bytes of facts, of registered values and of set_fact values, and their largest keys.

        A value that several hosts hold as the same object (a run_once task's registered result is set on every host
        of the play, by reference) is counted apart, once: `shared`, not in any host's figure.
        """
        if self.vm is None:
            return None
        start = time.process_time()
        facts_cache = self.vm._fact_cache
        nonpersistent = self.vm._nonpersistent_fact_cache
        fact_hosts = set(facts_cache.keys())
        hosts = sorted(fact_hosts | set(nonpersistent.keys()))
        sample = even_sample(hosts, self.sample)
        holders = {}
        for host in sample:
            for value in nonpersistent.get(host, {}).values():
                holders[id(value)] = holders.get(id(value), 0) + 1
        per_host = {}
        keys = {'facts': {}, 'registered': {}, 'set_fact': {}}
        shared = {}
        for host in sample:
            facts = sizes_of(facts_cache.get(host) if host in fact_hosts else {})
            own = {}
            for k, v in nonpersistent.get(host, {}).items():
                if holders[id(v)] > 1:
                    shared.setdefault((str(k), id(v)), json_size(v))
                else:
                    own[str(k)] = json_size(v)
            reg = dict((k, v) for k, v in own.items() if k in self.registered)
            setf = dict((k, v) for k, v in own.items() if k not in self.registered)
            per_host[host] = {'facts': sum(facts.values()), 'registered': sum(reg.values()),
                              'set_fact': sum(setf.values())}
            for kind, sizes in (('facts', facts), ('registered', reg), ('set_fact', setf)):
                for k, v in sizes.items():
                    keys[kind].setdefault(k, []).append(v)
        n = len(per_host) or 1
        top = {}
        for kind, sizes in keys.items():
            means = sorted(((sum(v) / n, k) for k, v in sizes.items()), reverse=True)
            top[kind] = [{'key': k, 'mean_bytes': round(m)} for m, k in means[:8]]
        return {'hosts_in_caches': len(hosts), 'sampled': len(per_host), 'per_host': per_host, 'top_keys': top,
                'shared': [{'key': k, 'bytes': b} for (k, dummy), b in sorted(shared.items())],
                'cpu_s': time.process_time() - start}

    def v2_playbook_on_stats(self, stats):
        recap = dict((h, stats.summarize(h)) for h in sorted(stats.processed))
        doc = {
            'recap': recap,
            'plays': [{'name': p['name'], 'hosts': len(p['hosts']), 'no_hosts_matched': p['no_hosts_matched']}
                      for p in self.plays],
            'tasks': [self.tasks[k] for k in self.task_order],
            'sizes': self._sizes(),
        }
        if self.out:
            with open(self.out, 'w') as handle:
                json.dump(doc, handle, indent=1, sort_keys=True)
