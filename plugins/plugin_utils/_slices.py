# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
"""A run as N slices (AWX job slicing, or N ansible-runner runs): the run's identity, where a slice writes its part,
and the merge of the parts into the one readiness report and the one run summary an unsliced run writes.

How AWX slices (awx/main/models/inventory.py ``get_script_data``, ``get_sliced_hosts``; awx/main/models/jobs.py
``create_unified_job``; awx/main/models/unified_jobs.py ``awx_meta_vars``; ansible/awx at e21dd0a): the job template's
inventory, enabled hosts ordered by name, is cut round robin (slice k of N gets hosts k-1, k-1+N, ...; never more
slices than hosts); each slice is a job of a workflow job created for the launch, with its own inventory of those
hosts and every group and variable of the inventory. The playbook is told nothing about the slicing: no slice number
or count is an extra variable. Each job gets ``awx_job_id`` (its own id, different per slice) and, as a node of a
workflow, ``awx_workflow_job_id`` (the workflow job the slicing created: the same for every slice); ``tower_*`` names
carry the same values. So a slice's run id is ``awx_workflow_job_id`` and its slice id ``awx_job_id``.

The merge reads only what the slices wrote (report.json's per-host entries, run-summary.json), never the readiness
role's internals, and builds the files with the functions the unsliced run uses (_readiness_report.build_report and
its renderers; _run_summary's counts and lines).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import datetime
import os
import re
import tempfile

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_summary

SLICES_DIR = 'slices'
REPORT_FILE = 'report.json'
# The variables AWX sets on a job (awx_meta_vars: each under the prefixes awx_ and tower_), in the order they are
# taken: the workflow job's id (every slice of one launch shares it), then the job's own.
RUN_ID_VARS = ('awx_workflow_job_id', 'tower_workflow_job_id', 'awx_job_id', 'tower_job_id')
SLICE_ID_VARS = ('awx_job_id', 'tower_job_id')
ID_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')
ID_RULE = '1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit'


class SliceError(Exception):
    """A run id, slice id or slice file the merge cannot take (the message names the value and what is allowed)."""


def _id(value):
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return text or None


def check_id(name, value):
    if not ID_RE.match(value):
        raise SliceError('{0}={1!r} is not allowed: use {2} (it names a directory)'.format(name, value, ID_RULE))
    return value


def now_id(now=None):
    """The run's own id when nothing names it: the UTC time, to the second."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.strftime('%Y%m%dT%H%M%SZ')


def identity(values, sliced=False, now=None):
    """``{'run_id', 'run_id_from', 'slice_id', 'sliced'}`` of a run from its variables (``values``: the typed
    nodeprep_run_id / nodeprep_slice_id and the AWX variables as given).

    run id: nodeprep_run_id, else AWX's workflow job id, else AWX's job id, else now_id(). A slice (``sliced``) needs
    a run id that every slice shares (given, or the workflow job's) and a slice id of its own (nodeprep_slice_id,
    else AWX's job id)."""
    run_id, source = _id(values.get('nodeprep_run_id')), 'nodeprep_run_id'
    for name in RUN_ID_VARS:
        if run_id is None:
            run_id, source = _id(values.get(name)), name
    if run_id is None:
        run_id, source = now_id(now), 'time'
    check_id(source, run_id)
    slice_id = _id(values.get('nodeprep_slice_id'))
    slice_from = 'nodeprep_slice_id'
    for name in SLICE_ID_VARS:
        if slice_id is None:
            slice_id, slice_from = _id(values.get(name)), name
    if slice_id is not None:
        check_id(slice_from, slice_id)
    if sliced:
        if source not in ('nodeprep_run_id', 'awx_workflow_job_id', 'tower_workflow_job_id'):
            raise SliceError('nodeprep_sliced is true but the slices of this run share no run id ({0}): AWX gives '
                             'every slice of a sliced job awx_workflow_job_id; elsewhere set nodeprep_run_id to the '
                             'same value on every slice'.format('from ' + source if source != 'time' else 'none given'))
        if slice_id is None:
            raise SliceError('nodeprep_sliced is true but this slice has no id: AWX gives every job awx_job_id; '
                             'elsewhere set nodeprep_slice_id, different on every slice')
    return {'run_id': run_id, 'run_id_from': source, 'slice_id': slice_id if sliced else None,
            'sliced': bool(sliced)}


# The variables of a run's identity: ours (typed with _run_settings.SETTINGS) and AWX's (ids, as AWX gives them).
TYPED_VARS = ('nodeprep_sliced', 'nodeprep_run_id', 'nodeprep_slice_id')
# What tells a slice of an AWX sliced job (rules/_rolling.sliced_job, the one rule, which the rolling plan refuses
# with): the workflow job AWX makes for a sliced launch has the job template's name.
AWX_SLICE_VARS = tuple('{0}_{1}'.format(prefix, name) for prefix in _rolling.AWX_PREFIXES
                       for name in ('workflow_job_id', 'workflow_job_name', 'job_template_name'))


def run_identity(templar, task_vars, now=None):
    """identity() of the run whose variables are ``task_vars`` (templated with ``templar``: the action's). A slice
    of an AWX sliced job (rules/_rolling.sliced_job) is a slice whether or not nodeprep_sliced says so: its slices
    would otherwise write over each other's report."""
    names = TYPED_VARS + RUN_ID_VARS + tuple(name for name in AWX_SLICE_VARS if name not in RUN_ID_VARS)
    provided = dict((name, task_vars[name]) for name in names if name in task_vars)
    if provided and templar is not None:
        provided = templar.template(provided)
    try:
        values = _run_settings.typed(provided, TYPED_VARS)
    except ValueError as exc:
        raise SliceError(str(exc))
    values.update((name, provided[name]) for name in RUN_ID_VARS if name in provided)
    sliced = values['nodeprep_sliced'] or _rolling.sliced_job(provided) is not None
    return identity(values, sliced=sliced, now=now)


def output_dir(base, ident):
    """Where a run writes its summary and report: ``base``, or ``base/slices/<run id>/<slice id>`` for a slice."""
    if not ident['sliced']:
        return base
    return os.path.join(base, SLICES_DIR, ident['run_id'], ident['slice_id'])


def run_dir(base, run_id):
    return os.path.join(base, SLICES_DIR, check_id('run id', run_id))


def stats(ident):
    """The set_stats data a slice leaves (AWX keeps it as the job's artifacts and gives it to the next node of the
    workflow as extra variables: the merge learns the run id there). Every slice sets the same value, so AWX's
    merge of the slices' artifacts (the last one wins) keeps it."""
    return {'data': {'nodeprep_run_id': ident['run_id']}, 'per_host': False, 'aggregate': True}


# ------------------------------------------------------------------------------------------------- the merge

def host_order(expected, found):
    """The hosts of the merged run: ``expected`` (the merge play's hosts, inventory order) first, then the hosts only
    the slices name, sorted (AWX orders a slice's hosts by name)."""
    order = [str(host) for host in expected or []]
    seen = set(order)
    order.extend(sorted(host for host in found if host not in seen))
    return order


def report_results(report, where=''):
    """The per-host results of a slice's report.json, in the shape the readiness role keeps per host
    (``checks``/``values``, or ``unreachable`` with ``msg``), so that build_report() makes the same entries again."""
    if not isinstance(report, dict) or not isinstance(report.get('hosts'), dict):
        raise SliceError('{0}: not a readiness report (no "hosts")'.format(where or REPORT_FILE))
    out = {}
    for host in report.get('host_order') or sorted(report['hosts']):
        entry = report['hosts'].get(host)
        if not isinstance(entry, dict):
            raise SliceError('{0}: host {1} has no entry'.format(where or REPORT_FILE, host))
        if entry.get('status') == 'unreachable':
            out[host] = {'unreachable': True, 'msg': entry.get('msg') or ''}
        else:
            out[host] = {'checks': list(entry.get('checks') or []), 'values': list(entry.get('values') or [])}
    return out


def merge_reports(reports, expected=(), run_id=''):
    """``(hosts, results, generated, missing)`` for build_report() from the slices' reports (``{slice: report}``):
    every host once (a host in two slices is refused), ``generated`` the latest slice's, and ``missing`` the expected
    hosts no slice reported (build_report's ``unreachable``: why they have no result)."""
    results, owner, generated = {}, {}, ''
    for name in sorted(reports):
        report = reports[name]
        for host, result in report_results(report, '{0}/{1}'.format(name, REPORT_FILE)).items():
            if host in owner:
                raise SliceError('host {0} is in the reports of slices {1} and {2} of run {3}: slices never share a '
                                 'host'.format(host, owner[host], name, run_id))
            owner[host] = name
            results[host] = result
        generated = max(generated, str(report.get('generated') or ''))
    hosts = host_order(expected, results)
    missing = dict((host, 'no result: no slice of run {0} reported this host (its slice failed before the report, or '
                          'it was left out of every slice)'.format(run_id))
                   for host in hosts if host not in results)
    return hosts, results, generated, missing


SUMMARY_MAPS = ('changed', 'reboot', 'failed', 'no_gpu', 'limits')


def merge_summaries(summaries, expected=(), run_id=''):
    """The run summary of the whole run from the slices' run-summary.json (``{slice: summary}``): what each host's
    slice said of it, every count again; an expected host that no slice names is failed (its slice did not end)."""
    modes = set(bool(summary.get('check_mode')) for summary in summaries.values())
    if len(modes) > 1:
        raise SliceError('run {0}: some slices ran in check mode and some did not: {1}'.format(run_id, ', '.join(
            '{0}={1}'.format(name, bool(summaries[name].get('check_mode'))) for name in sorted(summaries))))
    merged = {'version': _run_summary.VERSION, 'check_mode': modes.pop() if modes else False, 'run_id': run_id}
    for key in SUMMARY_MAPS:
        merged[key] = {}
    owner, unchanged = {}, set()
    for name in sorted(summaries):
        summary = summaries[name]
        hosts = set(summary.get('unchanged') or [])
        for key in SUMMARY_MAPS:
            hosts.update((summary.get(key) or {}).keys())
        for host in hosts:
            if host in owner:
                raise SliceError('host {0} is in the summaries of slices {1} and {2} of run {3}: slices never share '
                                 'a host'.format(host, owner[host], name, run_id))
            owner[host] = name
        for key in SUMMARY_MAPS:
            merged[key].update(summary.get(key) or {})
        unchanged.update(summary.get('unchanged') or [])
    order = host_order(expected, owner)
    for host in order:
        if host not in owner:
            merged['failed'][host] = {'role': None, 'task': None, 'msg': 'no summary: no slice of run {0} named this '
                                      'host (its slice failed before the summary)'.format(run_id), 'hint': None,
                                      'roles': [], 'not_predicted': []}
    merged['unchanged'] = [host for host in order if host in unchanged]
    merged['hosts'] = len(order)
    merged['counts'] = _run_summary.counts(merged)
    return merged


def read_slices(base, run_id, name, loader):
    """``{slice id: loader(path)}`` of every ``<base>/slices/<run id>/<slice>/<name>`` that exists."""
    found = {}
    folder = run_dir(base, run_id)
    if not os.path.isdir(folder):
        return found
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry, name)
        if ID_RE.match(entry) and os.path.isfile(path):
            found[entry] = loader(path)
    return found


def runs_found(base):
    folder = os.path.join(base, SLICES_DIR)
    return sorted(entry for entry in os.listdir(folder) if ID_RE.match(entry)) if os.path.isdir(folder) else []


def write_atomic(path, text):
    """Write ``text`` to ``path`` through a temporary file of its directory (created when missing) and a rename, so
    that a reader (node_exporter's textfile collector, a browser) never sees half a file; return the path. The one
    writer of the run's files on the controller (the readiness report, the run summary, the merged slices). Text
    decoded from a node with surrogateescape is written back as its bytes, as Ansible's to_bytes does."""
    folder = os.path.dirname(path) or '.'
    if not os.path.isdir(folder):
        os.makedirs(folder)
    handle, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', dir=folder)
    try:
        with os.fdopen(handle, 'wb') as out:
            out.write(text.encode('utf-8', 'surrogateescape'))
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
