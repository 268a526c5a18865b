# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bench-only callback: counts, per host, the task results that ran a module on the node, and times every task.

Enabled only by bench/fleet_bench.py (ANSIBLE_CALLBACKS_ENABLED=bench_counter, ANSIBLE_CALLBACK_PLUGINS=bench/
callback_plugins); it writes JSON to $BENCH_COUNTER_OUT when the playbook ends. Not part of the collection.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = '''
    name: bench_counter
    type: aggregate
    short_description: counts remote module executions per host and times each task (bench only)
    description:
      - Counts, per host, the task results that executed a module on the host (not skipped, not controller-only
        actions such as set_fact, assert, debug, include_*), with one count per loop item.
      - Records every task's duration per host and writes everything as JSON to the file named by BENCH_COUNTER_OUT.
    requirements:
      - enable in the callbacks_enabled list
'''

import json
import os
import time

from ansible.plugins.callback import CallbackBase

# Actions that run on the controller only: no module is sent to the node for them.
CONTROLLER_ONLY = frozenset((
    'add_host', 'assert', 'debug', 'fail', 'group_by', 'include_role', 'import_role', 'include_tasks',
    'import_tasks', 'include_vars', 'include', 'meta', 'pause', 'set_fact', 'set_stats',
    'validate_argument_spec', 'async_status_local', 'wait_for_connection_local',
    # This collection's action plugins that never connect to the node.
    'gpufleet.nodeprep.role_arguments', 'gpufleet.nodeprep.readiness_report',
))


def short_action(action):
    """'ansible.builtin.set_fact' and 'ansible.legacy.set_fact' -> 'set_fact'; a collection's module keeps its FQCN."""
    for prefix in ('ansible.builtin.', 'ansible.legacy.'):
        if action.startswith(prefix):
            return action[len(prefix):]
    return action


def runs_module(action, delegated_to_controller=False):
    """True when a task result with this action executed a module on the managed node."""
    return not delegated_to_controller and short_action(action) not in CONTROLLER_ONLY


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'bench_counter'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._out = os.environ.get('BENCH_COUNTER_OUT')
        self._start = time.time()
        self._hosts = {}
        self._tasks = {}
        self._order = []
        self._running = {}

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def _host(self, name):
        return self._hosts.setdefault(name, {
            'module_execs': 0, 'controller_only': 0, 'skipped': 0, 'ok': 0, 'changed': 0, 'failed': 0,
            'unreachable': 0, 'actions': {}})

    def _task(self, task):
        uid = task._uuid
        if uid not in self._tasks:
            self._order.append(uid)
            self._tasks[uid] = {
                'name': task.get_name(), 'action': self._action(task), 'path': task.get_path() or '',
                'ran': {}, 'skipped': [], 'changed': [], 'seconds': {}}
        return self._tasks[uid]

    @staticmethod
    def _action(task):
        return getattr(task, 'resolved_action', None) or task.action

    @staticmethod
    def _to_controller(task, host_vars=None):
        target = task.delegate_to
        return target in ('localhost', '127.0.0.1') if target else False

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._task(task)

    def v2_runner_on_start(self, host, task):
        self._running[(host.get_name(), task._uuid)] = time.time()

    def _finish(self, result, status):
        host = result._host.get_name()
        task = result._task
        entry = self._task(task)
        started = self._running.pop((host, task._uuid), None)
        if started is not None:
            entry['seconds'][host] = round(time.time() - started, 4)
        counts = self._host(host)
        res = result._result or {}
        if status == 'unreachable':
            counts['unreachable'] += 1
            return
        action = short_action(self._action(task))
        items = res.get('results') if isinstance(res.get('results'), list) else None
        if status == 'skipped' or (items is not None and items and all(i.get('skipped') for i in items)):
            counts['skipped'] += 1
            entry['skipped'].append(host)
            return
        if not runs_module(self._action(task), self._to_controller(task)):
            counts['controller_only'] += 1
            return
        execs = 1 if items is None else len([i for i in items if not i.get('skipped')])
        counts['module_execs'] += execs
        counts['actions'][action] = counts['actions'].get(action, 0) + execs
        entry['ran'][host] = execs
        counts['ok' if status == 'ok' else 'failed'] += 1
        if res.get('changed'):
            counts['changed'] += 1
            entry['changed'].append(host)

    def v2_runner_on_ok(self, result):
        self._finish(result, 'ok')

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._finish(result, 'failed')

    def v2_runner_on_skipped(self, result):
        self._finish(result, 'skipped')

    def v2_runner_on_unreachable(self, result):
        self._finish(result, 'unreachable')

    def v2_playbook_on_stats(self, stats):
        if not self._out:
            return
        tasks = []
        for uid in self._order:
            t = self._tasks[uid]
            t['total_s'] = round(sum(t['seconds'].values()), 4)
            tasks.append(t)
        data = {'wall_s': round(time.time() - self._start, 3), 'hosts': self._hosts, 'tasks': tasks}
        with open(self._out, 'w') as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
