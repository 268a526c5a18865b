# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.readiness_verdict: the readiness role's last step on each node, in one task
(one task slot per node): the node's verdict for its node_exporter (the readiness_textfile module, when
nodeprep_readiness_node_textfile is on), then the node fails when it is not ready (nodeprep_readiness_fail). The
settings are typed here with the role's SETTINGS (plugin_utils/_readiness_settings.py), as readiness_info types them.
Documentation: plugins/modules/readiness_verdict.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain

TEXTFILE_MODULE = 'gpufleet.nodeprep.readiness_textfile'
# The settings this step reads (typed with the role's SETTINGS, their one home).
READS = ('nodeprep_readiness_fail', 'nodeprep_readiness_node_textfile', 'nodeprep_readiness_node_textfile_path')


def verdict_message(host, result):
    """Why ``host`` fails, from its readiness result (readiness_info's, or Ansible's for a node that could not be
    checked); None when it is ready."""
    if not isinstance(result, dict) or 'checks' not in result:
        msg = result.get('msg') if isinstance(result, dict) else None
        return '{0} could not be checked: {1}'.format(host, msg or 'no readiness result')
    failed = [check['id'] for check in result['checks'] if check.get('status') == _readiness.FAIL]
    if not failed:
        return None
    return ('{0} is not ready: {1} failed (details in the report; nodeprep_readiness_fail=false reports without '
            'failing).'.format(host, ', '.join(failed)))


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('result',))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        _validation, args = self.validate_argument_spec(argument_spec=dict(result=dict(type='raw', required=True)))
        readiness = plain(args['result'])
        provided = dict((name, task_vars[name]) for name in READS if name in task_vars)
        try:
            provided = plain(self._templar.template(provided))
        except Exception as exc:  # an undefined variable inside a setting: name it, change nothing
            raise AnsibleActionFail('the variables of the readiness verdict cannot be read: {0}'.format(to_native(exc)))
        settings, problems = _plans.typed_with(_readiness_settings.ROLE, dict(
            (name, _readiness_settings.SETTINGS[name]) for name in READS), provided)
        if problems:
            result.update(failed=True, msg='readiness verdict: {0}'.format('; '.join(problems)))
            return result
        host = task_vars.get('inventory_hostname', '')
        result['changed'] = False
        unreachable = isinstance(readiness, dict) and bool(readiness.get('unreachable'))
        if settings['nodeprep_readiness_node_textfile'] and not unreachable:
            checks = readiness.get('checks') if isinstance(readiness, dict) else None
            written = self._execute_module(module_name=TEXTFILE_MODULE, task_vars=task_vars, module_args={
                'path': settings['nodeprep_readiness_node_textfile_path'], 'checks': checks or []})
            if written.get('failed') or written.get('unreachable'):
                result.update(written)
                return result
            result['textfile'] = dict((key, written[key]) for key in ('path', 'changed', 'diff') if key in written)
            result['changed'] = bool(written.get('changed'))
            if 'diff' in written:
                result['diff'] = written['diff']
        message = verdict_message(host, readiness)
        result['ready'] = message is None
        if message is not None and settings['nodeprep_readiness_fail']:
            result.update(failed=True, msg=message)
        return result
