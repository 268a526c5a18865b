# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Record which tasks changed on which host, for comparing a check-mode run with the real run (molecule only)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = '''
name: nodeprep_record
type: aggregate
short_description: Record the changed tasks of a playbook run per host
description:
  - Writes one JSON file per run into the folder named by E(NODEPREP_RECORD_DIR) (nothing when it is unset).
  - Each file maps a host to the ordered list of tasks that reported C(changed), and lists the tasks that were skipped
    or failed, so a check-mode run can be compared task by task with the real run.
requirements:
  - enabled in ANSIBLE_CALLBACKS_ENABLED
'''

import json
import os
import time

from ansible import context
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'nodeprep_record'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._folder = os.environ.get('NODEPREP_RECORD_DIR')
        self._hosts = {}
        self._playbook = None

    def v2_playbook_on_start(self, playbook):
        self._playbook = os.path.basename(playbook._file_name)

    def _task_id(self, result):
        # get_name() already starts with the role's name for a role's task
        return result._task.get_name()

    def _add(self, result, status):
        host = result._host.get_name()
        entry = self._hosts.setdefault(host, {'changed': [], 'failed': [], 'unreachable': False})
        if status == 'unreachable':
            entry['unreachable'] = True
        elif status == 'failed' and not result._task.ignore_errors:
            entry['failed'].append(self._task_id(result))
        elif status == 'ok' and result._result.get('changed'):
            entry['changed'].append(self._task_id(result))

    def v2_runner_on_ok(self, result):
        self._add(result, 'ok')

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._add(result, 'ok' if ignore_errors else 'failed')

    def v2_runner_on_unreachable(self, result):
        self._add(result, 'unreachable')

    def v2_runner_item_on_ok(self, result):
        pass

    def v2_playbook_on_stats(self, stats):
        if not self._folder:
            return
        if not os.path.isdir(self._folder):
            os.makedirs(self._folder)
        name = '{0:.6f}-{1}.json'.format(time.time(), os.getpid())
        with open(os.path.join(self._folder, name), 'w') as handle:
            json.dump({'playbook': self._playbook, 'check_mode': bool(context.CLIARGS.get('check')), 'hosts': self._hosts}, handle, indent=1, sort_keys=True)
