# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.readiness_report: collect every host's readiness result from hostvars
and write report.json, junit.xml, report.html, report.txt, readiness.prom and exit-status. Documentation:
plugins/modules/readiness_report.py.
The renderers live in plugins/plugin_utils/_readiness_report.py, which only this plugin imports."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import datetime
import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _slices
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._readiness_report import (
    FILES,
    build_report,
    exit_meaning,
    is_ready,
    render_matrix,
    render_prometheus,
)


def write_report(dest, report):
    """Write the report files into ``dest`` (created when missing), each atomically; return their paths."""
    dest = os.path.abspath(os.path.expanduser(dest))
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise AnsibleActionFail('dest {0} exists and is not a directory'.format(dest))
    if not os.path.isdir(dest):
        os.makedirs(dest)
    written = []
    for name, render in FILES:
        path = os.path.join(dest, name)
        _slices.write_atomic(path, render(report))
        written.append(path)
    return written


def write_textfile(path, report):
    """Write readiness.prom's metrics to ``path`` for the node_exporter textfile collector (its directory must
    exist; the collector reads only names ending in .prom)."""
    path = os.path.abspath(os.path.expanduser(path))
    if not path.endswith('.prom'):
        raise AnsibleActionFail('prometheus_textfile {0}: the textfile collector reads only files whose name ends '
                                'in .prom; give a name such as nodeprep_readiness.prom'.format(path))
    if not os.path.isdir(os.path.dirname(path)):
        raise AnsibleActionFail('prometheus_textfile {0}: the directory {1} does not exist; give the directory of '
                                'node_exporter --collector.textfile.directory'.format(path, os.path.dirname(path)))
    _slices.write_atomic(path, render_prometheus(report))
    return path


def _plain(value):
    """Deep copy of a templated hostvar into plain dicts, lists and strings."""
    if isinstance(value, dict):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('dest', 'hosts', 'result_var', 'prometheus_textfile'))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        _validation, args = self.validate_argument_spec(argument_spec=dict(
            dest=dict(type='path', default='./readiness-report'),
            hosts=dict(type='list', elements='str'),
            result_var=dict(type='str', default='nodeprep_readiness'),
            prometheus_textfile=dict(type='path'),
        ))
        hosts = args['hosts']
        if hosts is None:
            hosts = task_vars.get('ansible_play_hosts_all') or []
        hostvars = task_vars.get('hostvars') or {}
        unknown = [host for host in hosts if host not in hostvars]
        if unknown:
            known = sorted(str(name) for name in hostvars)
            raise AnsibleActionFail('hosts: {0} {1} not in the inventory; hosts the inventory has: {2}'.format(
                ', '.join(unknown), 'is' if len(unknown) == 1 else 'are', ', '.join(known) or 'none'))
        results = {}
        for host in hosts:
            value = hostvars[host].get(args['result_var'])
            if value:
                results[host] = _plain(value)
        generated = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
        report = build_report(list(hosts), results, generated)
        # The run's id; a slice of a sliced run writes its part into <dest>/slices/<run id>/<slice id>/ (the merge
        # playbook writes the run's report and the textfile from the slices').
        try:
            ident = _slices.run_identity(self._templar, task_vars)
        except _slices.SliceError as exc:
            raise AnsibleActionFail(to_native(exc))
        report['run_id'] = ident['run_id']
        args['dest'] = _slices.output_dir(args['dest'], ident)
        try:
            files = write_report(args['dest'], report)
        except (IOError, OSError) as exc:
            raise AnsibleActionFail('cannot write the readiness report into {0}: {1}'.format(
                args['dest'], to_native(exc)))
        if ident['sliced']:
            result['ansible_stats'] = _slices.stats(ident)
        elif args['prometheus_textfile']:
            try:
                files.append(write_textfile(args['prometheus_textfile'], report))
            except (IOError, OSError) as exc:
                raise AnsibleActionFail('cannot write prometheus_textfile {0}: {1}'.format(
                    args['prometheus_textfile'], to_native(exc)))
        order = report['host_order']
        result.update(
            changed=False,
            dest=os.path.abspath(os.path.expanduser(args['dest'])),
            files=files,
            summary=report['summary'],
            matrix=render_matrix(report),
            ready=is_ready(report),
            not_ready_hosts=[h for h in order if report['hosts'][h]['status'] == 'not_ready'],
            unreachable_hosts=[h for h in order if report['hosts'][h]['status'] == 'unreachable'],
            exit_status=report['exit_status'],
            exit_status_meaning=exit_meaning(report),
            run_id=ident['run_id'],
        )
        return result
