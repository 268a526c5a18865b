# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.merge_slices: read what the slices of one sliced run wrote (their
report.json and run-summary.json) and write the run's readiness report and run summary, as an unsliced run writes
them. Documentation: plugins/modules/merge_slices.py; the merge: plugins/plugin_utils/_slices.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_report
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_summary
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _slices
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans

DEFAULT_DEST = _readiness_settings.SETTINGS['nodeprep_readiness_report_dir']['default']


def _load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        raise AnsibleActionFail('cannot read {0}: {1}'.format(path, to_native(exc)))


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('dest', 'run_id', 'hosts', 'prometheus_textfile', 'keep'))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        _validation, args = self.validate_argument_spec(argument_spec=dict(
            dest=dict(type='path'),
            run_id=dict(type='str'),
            hosts=dict(type='list', elements='str', default=[]),
            prometheus_textfile=dict(type='path'),
            keep=dict(type='bool', default=False),
        ))
        dest = args['dest'] or self._templar.template(task_vars.get('nodeprep_readiness_report_dir') or DEFAULT_DEST)
        dest = os.path.abspath(os.path.expanduser(dest))
        # Only the run id given: the merge job's own AWX ids are not the slices' (it is another node of the workflow).
        run_id = args['run_id']
        if not run_id and task_vars.get('nodeprep_run_id') is not None:
            try:
                run_id = _run_settings.typed(self._templar.template({'nodeprep_run_id': task_vars['nodeprep_run_id']}),
                                             ('nodeprep_run_id',))['nodeprep_run_id']
            except ValueError as exc:
                raise AnsibleActionFail(to_native(exc))
        if not run_id:
            raise AnsibleActionFail('run_id: no run id given (nodeprep_run_id; in an AWX workflow the slices leave it '
                                    'as the artifact nodeprep_run_id for the next node); runs with slices in {0}: '
                                    '{1}'.format(dest, ', '.join(_slices.runs_found(dest)) or 'none'))
        try:
            _slices.check_id('run_id', str(run_id))
            reports = _slices.read_slices(dest, run_id, _slices.REPORT_FILE, _load)
            summaries = _slices.read_slices(dest, run_id, _run_summary.FILE_NAME, _load)
        except _slices.SliceError as exc:
            raise AnsibleActionFail(to_native(exc))
        if not reports and not summaries:
            raise AnsibleActionFail('run {0}: no slice wrote {1} or {2} under {3}; runs with slices there: {4}'.format(
                run_id, _slices.REPORT_FILE, _run_summary.FILE_NAME, _slices.run_dir(dest, run_id),
                ', '.join(_slices.runs_found(dest)) or 'none'))

        files, lines = [], []
        result.update(changed=False, run_id=run_id, dest=dest, slices=sorted(set(reports) | set(summaries)))
        try:
            if reports:
                hosts, results, generated, missing = _slices.merge_reports(reports, args['hosts'], run_id)
                report = _readiness_report.build_report(hosts, results, generated, unreachable=missing)
                report['run_id'] = run_id
                for name, render in _readiness_report.FILES:
                    files.append(_slices.write_atomic(os.path.join(dest, name), render(report)))
                textfile = args['prometheus_textfile'] or self._templar.template(
                    task_vars.get('nodeprep_readiness_prometheus_textfile') or '')
                if textfile:
                    files.append(self._textfile(textfile, report))
                lines.extend(_readiness_report.render_matrix(report).splitlines())
                result.update(summary=report['summary'], exit_status=report['exit_status'],
                              exit_status_meaning=_readiness_report.EXIT_MEANINGS[report['exit_status']])
            if summaries:
                merged = _slices.merge_summaries(summaries, args['hosts'], run_id)
                files.append(_slices.write_atomic(os.path.join(dest, _run_summary.FILE_NAME),
                                                  json.dumps(merged, indent=2, sort_keys=True) + '\n'))
                lines.extend(_run_summary.render(merged, _plans.SITE_ROLES))
                result['run_summary'] = merged
        except _slices.SliceError as exc:
            raise AnsibleActionFail(to_native(exc))
        except (IOError, OSError) as exc:
            raise AnsibleActionFail('cannot write the merged files into {0}: {1}'.format(dest, to_native(exc)))
        if not args['keep']:
            shutil.rmtree(_slices.run_dir(dest, run_id), ignore_errors=True)
        result.update(files=files, lines=lines)
        return result

    @staticmethod
    def _textfile(path, report):
        path = os.path.abspath(os.path.expanduser(path))
        if not path.endswith('.prom') or not os.path.isdir(os.path.dirname(path)):
            raise AnsibleActionFail('prometheus_textfile {0}: give a .prom name in an existing directory (the one of '
                                    'node_exporter --collector.textfile.directory)'.format(path))
        return _slices.write_atomic(path, _readiness_report.render_prometheus(report))
