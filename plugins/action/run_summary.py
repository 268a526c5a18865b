# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.run_summary: record what each role's plan said and each role's first error
per host (controller only, no round trip), then write and return the end-of-run summary of site.yml.
Documentation: plugins/modules/run_summary.py; the rules: plugins/plugin_utils/_run_summary.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_summary
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _slices
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain

# The readiness role's default of nodeprep_readiness_report_dir (its one home: the role's SETTINGS): the summary lands
# next to the readiness report.
DEFAULT_DEST = _readiness_settings.SETTINGS['nodeprep_readiness_report_dir']['default']
RECORD_VAR = _run_summary.RECORD_FACT
ERRORS_VAR = 'nodeprep_run_errors'
UNPREDICTED_VAR = 'nodeprep_run_unpredicted'
TIMED_OUT_VAR = 'nodeprep_timed_out'


def write_json(dest, name, data):
    """Write ``data`` as ``dest/name`` atomically (``dest`` created when missing); return the path."""
    dest = os.path.abspath(os.path.expanduser(dest))
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise AnsibleActionFail('dest {0} exists and is not a directory'.format(dest))
    return _slices.write_atomic(os.path.join(dest, name), json.dumps(data, indent=2, sort_keys=True) + '\n')


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('record', 'error', 'leave', 'dest', 'hosts'))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        _validation, args = self.validate_argument_spec(
            argument_spec=dict(
                record=dict(type='list', elements='str'),
                error=dict(type='dict', options=dict(role=dict(type='str', required=True),
                                                     task=dict(type='str', default=''),
                                                     result=dict(type='raw', default={}),
                                                     timed_out_after=dict(type='int', default=0))),
                leave=dict(type='dict'),
                dest=dict(type='path'),
                hosts=dict(type='list', elements='str'),
            ),
            mutually_exclusive=[('record', 'error', 'leave', 'dest'), ('record', 'error', 'leave', 'hosts')],
        )
        facts = task_vars.get('ansible_facts') or {}
        if args['record'] is not None:
            unknown = [role for role in args['record'] if role not in _plans.SITE_ROLES]
            if unknown:
                raise AnsibleActionFail('record: {0} not a role of gpufleet.nodeprep; the roles: {1}'.format(
                    ', '.join(unknown), ', '.join(_plans.SITE_ROLES)))
            before = plain(facts.get(RECORD_VAR) or {})
            result.update(changed=False, ansible_facts={RECORD_VAR: _run_summary.record(
                plain(facts.get('nodeprep_plans') or {}), args['record'], before)})
            return result
        if args['error'] is not None:
            errors = plain(facts.get(ERRORS_VAR) or {})
            role = args['error']['role']
            failed = plain(args['error']['result'])
            if args['error']['timed_out_after'] and isinstance(failed, dict):
                failed['timedout'] = {'period': args['error']['timed_out_after']}
            error = _run_summary.error_of(role, args['error']['task'], failed)
            errors.setdefault(role, error)
            result.update(changed=False, error=errors[role], ansible_facts={
                ERRORS_VAR: errors,
                UNPREDICTED_VAR: _run_summary.unpredicted(errors, bool(self._play_context.check_mode))})
            return result

        if args['leave'] is not None:
            # The node leaves the run with the error recorded before (error_of): unreachable when it could not be
            # reached (the recap counts it so), failed otherwise.
            error = plain(args['leave'])
            text = '{0}: {1}'.format(error.get('role') or 'gather', error.get('msg') or 'failed')
            if error.get('unreachable'):
                result.update(changed=False, unreachable=True, msg=text)
            else:
                result.update(changed=False, failed=True, msg=text)
            return result

        hosts = args['hosts'] if args['hosts'] is not None else list(task_vars.get('ansible_play_hosts_all') or [])
        alive = list(task_vars.get('ansible_play_hosts') or [])
        hostvars = task_vars.get('hostvars') or {}
        unknown = [host for host in hosts if host not in hostvars]
        if unknown:
            raise AnsibleActionFail('hosts: {0} not in the inventory'.format(', '.join(unknown)))
        nodes = {}
        for host in hosts:
            values = hostvars[host]
            # The facts this action set, read from their namespace (not as injected top-level variables).
            host_facts = values.get('ansible_facts') or {}
            nodes[host] = plain({'record': host_facts.get(RECORD_VAR) or {}, 'errors': host_facts.get(ERRORS_VAR) or {},
                                 'reboot_required': values.get('nodeprep_reboot_required') or False,
                                 'reboot_reasons': values.get('nodeprep_reboot_reasons') or [],
                                 'timed_out': host_facts.get(TIMED_OUT_VAR) or []})
        try:
            ident = _slices.run_identity(self._templar, task_vars)
        except _slices.SliceError as exc:
            raise AnsibleActionFail(to_native(exc))
        summary = _run_summary.build(hosts, alive, nodes, check_mode=bool(self._play_context.check_mode),
                                     roles=_plans.SITE_ROLES, run_id=ident['run_id'])
        dest = args['dest'] or task_vars.get('nodeprep_readiness_report_dir') or DEFAULT_DEST
        dest = _slices.output_dir(self._templar.template(dest), ident)
        try:
            path = write_json(dest, _run_summary.FILE_NAME, summary)
        except (IOError, OSError) as exc:
            raise AnsibleActionFail('cannot write {0} into {1}: {2}'.format(_run_summary.FILE_NAME, dest,
                                                                            to_native(exc)))
        result.update(changed=False, summary=summary, lines=_run_summary.render(summary, _plans.SITE_ROLES), path=path,
                      run_id=ident['run_id'])
        if ident['sliced']:
            # This slice's part; the merge playbook writes the run's summary. The run id for the merge (AWX passes a
            # job's set_stats data to the next node of the workflow).
            result['ansible_stats'] = _slices.stats(ident)
        return result
