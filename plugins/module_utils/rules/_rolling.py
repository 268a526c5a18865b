# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Rolling maintenance on a busy Slurm cluster (playbooks/rolling_upgrade.yml): the rules, as pure functions.

* Slurm's answers: :func:`parse_nodes` (``scontrol show node -o``), :func:`parse_jobs` (``squeue -h -o
  '%i|%T|%u|%N'``), :func:`parse_config` (``scontrol show config``), :func:`parse_partitions` (``scontrol show
  partition -o``), :func:`expand_hostlist`, read as Slurm 22.05 and 24.11 print them (the captures in
  tests/unit/plugins/module_utils/slurm/<version>/).
* Our mark: the node's Slurm reason ``nodeprep:<run id>:<phase>`` (:func:`format_reason`, :func:`parse_reason`; the
  notes slurmctld appends to it are read as notes), a file on the node (``MARKER``) written before the first drain,
  so that a node we took is known again on a rerun, and a lock per cluster on the Slurm controller
  (:func:`lock_decision`).
* Per node: :func:`node_status` (what Slurm says), :func:`decide` (the state of the node in this run: a candidate, a
  node another party holds, one we took earlier and where to pick it up), :func:`after_wait` (the busy policy),
  :func:`node_empty`, :func:`after_verify`; per run: :func:`batch_size`, :func:`batches`, :func:`preflight`,
  :func:`drain_allowed`, :func:`poll_commands`, :func:`stop_run`, :func:`sliced_job`; the run's settings:
  ``SETTINGS``.

No Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

REASON_PREFIX = 'nodeprep'
# The phases a node of ours goes through, recorded in its reason (and in MARKER on the node).
PHASES = ('drain', 'work', 'reboot', 'verify', 'verify-failed')
# nodeprep_rolling_reboot: who reboots a node the kernel or driver needs rebooted: the roles (ansible.builtin.reboot
# on the node) or Slurm (``scontrol reboot nextstate=DOWN reason=nodeprep:<run id>:reboot <node>``, RebootProgram).
REBOOT_MODES = ('roles', 'slurm')
# What slurmctld appends to a node's reason during `scontrol reboot`: " : reboot issued" when it sends the reboot,
# " : reboot complete" when a nextstate=DOWN node registers again, " : reboot timed out" after ResumeTimeout
# (node_mgr.c set_node_reboot_reason in 22.05; set_node_reason and set_node_down_ptr from 23.02).
SLURM_REBOOT_NOTES = ('reboot issued', 'reboot complete', 'reboot timed out')
# Every note slurmctld appends to a reason it finds set, read as a note on our reason on every version: the reboot
# notes, "Not responding" (ping_nodes.c, a node silent for SlurmdTimeout; appended from 23.02, commit a8c56beb56),
# "Node unexpectedly rebooted" (node_mgr.c validate_node_specs) and "ResumeTimeout reached" (power_save.c).
# Any other text after ours (an admin's or a health check's) makes the reason not ours.
SLURM_NOTES = SLURM_REBOOT_NOTES + ('Not responding', 'Node unexpectedly rebooted', 'ResumeTimeout reached')
# The per-node states of a run (docs/rolling-maintenance.md).
STATES = ('candidate', 'skipped-held', 'draining', 'drained', 'busy', 'work', 'verify', 'verify-failed', 'resumed',
          'done')
# Nodes the run does not drain: nothing to do there, or settings only (the settings roles run in place).
OUTSIDE = ('on-target', 'in-place')
BUSY_POLICIES = ('skip', 'wait', 'fail')
MARKER = '/var/lib/nodeprep/rolling-state'
# \Z, not $: "r1\n" is not a run id ($ matches before a trailing newline).
RUN_ID_RE = re.compile(r'^[A-Za-z0-9._-]{1,64}\Z')
# The base states of `scontrol show node` (slurm_common.c node_state_string) and the flags we read.
USABLE_BASES = ('IDLE', 'MIXED', 'ALLOCATED')
BUSY_BASES = ('MIXED', 'ALLOCATED')
# Flags that mean someone else holds the node: drained, failed, silent, in a maintenance or other reservation
# (RESERVED: another party's claim), a reboot pending, powered down or changing power state (power saving).
POWER_FLAGS = ('POWER_DOWN', 'POWERED_DOWN', 'POWERING_DOWN', 'POWERING_UP', 'POWER_UP')
HELD_FLAGS = ('DRAIN', 'FAIL', 'NOT_RESPONDING', 'MAINTENANCE', 'RESERVED', 'REBOOT_REQUESTED', 'REBOOT_ISSUED',
              'INVALID_REG') + POWER_FLAGS
REBOOT_FLAGS = ('REBOOT_REQUESTED', 'REBOOT_ISSUED')
# Jobs that still hold a node (squeue's %T); PENDING jobs hold none.
ACTIVE_JOB_STATES = ('RUNNING', 'COMPLETING', 'CONFIGURING', 'SUSPENDED', 'STOPPED', 'SIGNALING', 'STAGE_OUT',
                     'RESV_DEL_HOLD', 'REQUEUE_FED', 'REQUEUE_HOLD', 'REQUEUED', 'RESIZING')
# squeue's output format the parser reads (job id, state, user, the job's nodes as a hostlist).
SQUEUE_FORMAT = '%i|%T|%u|%N'
# The environment of every Slurm command we run: the C locale, and the time stamps Slurm prints (the reason's
# [user@time] among them) in ISO 8601 whatever the site set (slurm_make_time_str reads SLURM_TIME_FORMAT).
SLURM_ENV = ('LC_ALL=C', 'SLURM_TIME_FORMAT=standard')
# Slurm >= 23.02 appends "Not responding" to the reason of a node that is silent for SlurmdTimeout (a8c56beb56).
NOTES_APPENDED_FROM = (23, 2)
# The lock of a run, one per cluster, on the Slurm controller host: a symbolic link whose target names its holder
# (creating a link is atomic and fails when it exists), as Emacs locks a file.
LOCK_DIR = '/var/lib/nodeprep'
# AWX and AAP inject these extra variables into every job, at ansible/awx e21dd0a093: <prefix>_workflow_job_id and
# <prefix>_workflow_job_name for a job run by a workflow (awx/main/models/unified_jobs.py lines 1570-1571, in
# awx_meta_vars at line 1554), <prefix>_job_template_name (awx/main/models/jobs.py line 825, Job.awx_meta_vars at line
# 813); the prefixes are awx and tower (awx/main/constants.py line 100, JOB_VARIABLE_PREFIXES). A sliced job template
# runs as a workflow job made from the job template itself (jobs.py line 378 JobTemplate.create_unified_job, line 386:
# the unified job class of a workflow, the template's name copied), so each slice sees <prefix>_workflow_job_name equal
# to <prefix>_job_template_name (the slice's job_slice_number and job_slice_count are set on the job, not passed as
# variables: awx/main/models/workflow.py lines 383-388).
AWX_PREFIXES = ('awx', 'tower')
# The readiness verdict's own reason, nodeprep:health:<check ids> (health_action); not a run id.
HEALTH = 'health'
# nodeprep_readiness_slurm: report (Slurm is not asked) or drain (health_action on every judged node).
HEALTH_MODES = ('report', 'drain')

_KEY_RE = re.compile(r'(?:^|\s)([A-Za-z][A-Za-z0-9_:/.]*)=')
# Slurm appends " [user@time]" to a reason (node_info.c, slurm_make_time_str: ISO 8601 by default, any strftime
# format or "relative" words with SLURM_TIME_FORMAT): any text without brackets after user@.
_REASON_TAIL_RE = re.compile(r'\s*\[[^\[\]@\s]+@[^\[\]]*\]\s*$')
_SECONDS_RE = re.compile(r'^([0-9]+)\s*(?:sec)?$')
_PERCENT_RE = re.compile(r'^([0-9]+)\s*%$')
_COUNT_RE = re.compile(r'^[0-9]+$')
_CHECK_ID_RE = re.compile(r'^[A-Za-z0-9._-]+\Z')
_VERSION_RE = re.compile(r'([0-9]+)\.([0-9]+)')
# The fields scontrol prints after Reason= on a node's line: none in 22.05 and 24.11 (api/node_info.c puts the
# reason last); its text runs to the end of the line, "key=value" words in it included.
_LAST_FIELD = 'Reason'


class RollingError(ValueError):
    """A setting or an answer of the backend that the run cannot use."""


# --- the run's settings ----------------------------------------------------------------------------------------

# The variables of playbooks/rolling_upgrade.yml, typed once by the rolling_plan action with Ansible's argument spec
# validator (so -e nodeprep_rolling_include_held=false is False), in the shape of the roles' SETTINGS. A default of
# None is filled by the action: run_id (the UTC time), controller (the first host of group slurm_head).
SETTINGS = {
    'nodeprep_rolling_hosts': {'type': 'str', 'default': 'all', 'description': [
        'The GPU nodes of the run (a host pattern); leave the Slurm controller out.']},
    'nodeprep_rolling_controller': {'type': 'str', 'default': None, 'description': [
        'The host that runs scontrol and squeue; default the first host of group C(slurm_head).']},
    'nodeprep_rolling_run_id': {'type': 'str', 'default': None, 'description': [
        'The run id, 1 to 64 of C(A-Za-z0-9._-); it goes into the Slurm reason. Default the UTC time, '
        'C(%Y%m%dT%H%M%S).']},
    'nodeprep_rolling_batch': {'type': 'raw', 'default': 1, 'description': [
        'Nodes per batch: a count, or a percentage of the nodes worked on (rounded down, at least 1).']},
    'nodeprep_rolling_busy': {'type': 'str', 'default': 'skip', 'choices': list(BUSY_POLICIES), 'description': [
        'What happens to a node still busy after the drain timeout.']},
    'nodeprep_rolling_drain_timeout': {'type': 'int', 'default': 3600, 'description': [
        'Seconds to wait for a batch to empty.']},
    'nodeprep_rolling_min_available': {'type': 'int', 'default': 0, 'description': [
        'Usable nodes each partition keeps during a batch, checked before every batch is drained.']},
    'nodeprep_rolling_max_failed': {'type': 'int', 'default': 1, 'description': [
        'The run stops when more nodes failed verification.']},
    'nodeprep_rolling_include_held': {'type': 'bool', 'default': False, 'description': [
        'Also work on nodes someone else holds (their state and reason are kept; never resumed by the run).']},
    'nodeprep_rolling_retry_failed': {'type': 'bool', 'default': False, 'description': [
        'Work again on nodes whose reason says verify-failed, instead of verifying only.']},
    'nodeprep_rolling_reboot': {'type': 'str', 'default': 'roles', 'choices': list(REBOOT_MODES), 'description': [
        'Who reboots a node: the roles (Ansible) or Slurm (scontrol reboot nextstate=DOWN).']},
    'nodeprep_rolling_resume_timeout': {'type': 'int', 'default': 120, 'description': [
        'Seconds for a resumed node to be IDLE, MIXED or ALLOCATED.']},
    'nodeprep_rolling_poll_interval': {'type': 'int', 'default': 5, 'description': [
        'Seconds between two polls of Slurm (each poll is one scontrol and one squeue for the whole batch).']},
    'nodeprep_rolling_report_dir': {'type': 'str', 'default': './rolling-report', 'description': [
        'Where the plan table and the result are written on the controller.']},
    'nodeprep_rolling_backend_tasks': {'type': 'str', 'default': 'tasks/rolling_backend_slurm.yml', 'description': [
        'The backend tasks file (docs/rolling-maintenance.md, Backend).']},
}
# Settings that must be whole numbers, 0 or more (the validator types them; this bounds them).
COUNTS = ('nodeprep_rolling_drain_timeout', 'nodeprep_rolling_min_available', 'nodeprep_rolling_max_failed',
          'nodeprep_rolling_resume_timeout')
POSITIVE = ('nodeprep_rolling_poll_interval',)


def check_settings(settings):
    """The problems of typed settings that the validator does not see (bounds, the batch, the run id)."""
    problems = []
    for name in COUNTS + POSITIVE:
        value = settings.get(name)
        low = 1 if name in POSITIVE else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            problems.append('{0}={1!r} is not allowed; give a whole number, {2} or more'.format(name, value, low))
    try:
        batch_size(settings.get('nodeprep_rolling_batch'), 1)
    except RollingError as exc:
        problems.append(str(exc))
    if settings.get('nodeprep_rolling_run_id') is not None:
        try:
            check_run_id(settings['nodeprep_rolling_run_id'])
        except RollingError as exc:
            problems.append(str(exc))
    return problems


def sliced_job(variables):
    """Why the play is one slice of an AWX/AAP sliced job (the variables AWX injects, AWX_PREFIXES), or None."""
    for prefix in AWX_PREFIXES:
        workflow = variables.get(prefix + '_workflow_job_name')
        template = variables.get(prefix + '_job_template_name')
        if variables.get(prefix + '_workflow_job_id') is not None and workflow is not None and workflow == template:
            return ('this play runs as a slice of a sliced job ({0}_workflow_job_name={1!r} is the job template {0}_'
                    'job_template_name={2!r}, workflow job {3}): each slice runs on part of the inventory and shares '
                    'no state with the others, so batches, min_available and max_failed would be counted per slice; '
                    'run the rolling job unsliced (job slice count 1)'.format(
                        prefix, workflow, template, variables.get(prefix + '_workflow_job_id')))
    return None


# --- Slurm's answers -------------------------------------------------------------------------------------------

def parse_key_values(line):
    """``Key=Value`` pairs of one line of ``scontrol show ... -o``; a value runs until the next `` Key=``, so values
    with spaces (``OS=Linux 6.1.0 #1 SMP``) stay whole; ``Reason=`` is printed last and runs to the end of the line
    (``Reason=admin: ticket=42 disk=bad [root@...]`` is one reason)."""
    out = {}
    matches = list(_KEY_RE.finditer(line))
    for i, m in enumerate(matches):
        if m.group(1) == _LAST_FIELD:
            out[_LAST_FIELD] = line[m.end():].strip()
            break
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


def parse_nodes(text):
    """``scontrol show node -o`` (one node a line) -> {NodeName: {key: value}}; a line without NodeName is not a
    node (``No nodes in the system``)."""
    nodes = {}
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        kv = parse_key_values(line.strip())
        if 'NodeName' in kv:
            nodes[kv['NodeName']] = kv
    return nodes


def parse_partitions(text):
    """``scontrol show partition -o`` -> {PartitionName: {key: value}}."""
    out = {}
    for line in (text or '').splitlines():
        kv = parse_key_values(line.strip())
        if 'PartitionName' in kv:
            out[kv['PartitionName']] = kv
    return out


def parse_config(text):
    """``scontrol show config``: ``Name = value`` lines -> {Name: value}."""
    out = {}
    for line in (text or '').splitlines():
        if ' = ' not in line:
            continue
        key, _sep, value = line.partition(' = ')
        key = key.strip()
        if key and ' ' not in key:
            out[key] = value.strip()
    return out


def parse_seconds(value):
    """``600 sec`` (scontrol show config), ``600`` or ``GLOBAL``/``NONE`` -> int seconds, or None when not a
    number."""
    if value is None:
        return None
    m = _SECONDS_RE.match(str(value).strip())
    return int(m.group(1)) if m else None


def slurm_version(config):
    """``SLURM_VERSION = 24.11.5`` of scontrol show config -> (24, 11), or None."""
    m = _VERSION_RE.match(str((config or {}).get('SLURM_VERSION') or ''))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _split_top(text):
    """Split a hostlist at the commas outside brackets."""
    parts, depth, cur = [], 0, ''
    for ch in text:
        if ch == '[':
            depth += 1
        elif ch == ']':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _expand_range(body, where):
    out = []
    for item in body.split(','):
        lo, sep, hi = item.partition('-')
        if not _COUNT_RE.match(lo) or (sep and not _COUNT_RE.match(hi)):
            raise RollingError('hostlist {0!r}: {1!r} is not a number or a range of numbers'.format(where, item))
        if not sep:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise RollingError('hostlist {0!r}: range {1!r} runs backwards'.format(where, item))
        width = len(lo)
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


def expand_hostlist(text):
    """A Slurm hostlist (``gpu[001-003,007],rack[1-2]-n[01-02]``, as squeue's %N and scontrol show hostlist write
    it) -> the host names, in order (scontrol show hostnames; bracket groups multiply, a range keeps the width of its
    first number)."""
    names = []
    for part in _split_top(text or ''):
        expanded = ['']
        rest = part
        while rest:
            i = rest.find('[')
            if i < 0:
                expanded = [e + rest for e in expanded]
                break
            j = rest.find(']', i)
            if j < 0:
                raise RollingError('hostlist {0!r}: "[" without "]"'.format(part))
            expanded = [e + rest[:i] + n for e in expanded for n in _expand_range(rest[i + 1:j], part)]
            rest = rest[j + 1:]
        names.extend(expanded)
    return names


def parse_jobs(text):
    """``squeue -h -o '%i|%T|%u|%N'`` -> [{'id', 'state', 'user', 'nodes'}] in squeue's order; ``nodes``: the host
    names of the job's hostlist (empty for a pending job)."""
    jobs = []
    for line in (text or '').splitlines():
        line = line.strip()
        if not line:
            continue
        fields = line.split('|')
        if len(fields) < 2:
            raise RollingError('squeue printed {0!r}; expected the format {1}'.format(line, SQUEUE_FORMAT))
        jobs.append({'id': fields[0], 'state': fields[1], 'user': fields[2] if len(fields) > 2 else '',
                     'nodes': expand_hostlist(fields[3]) if len(fields) > 3 else []})
    return jobs


def active_jobs(jobs):
    """The ids of the jobs that still hold a node (running, completing...); pending ones hold none."""
    return [job['id'] for job in jobs if job['state'] in ACTIVE_JOB_STATES]


def jobs_by_node(jobs, names):
    """{name: ids of the active jobs on it} for ``names``, from one squeue over all of them (parse_jobs)."""
    out = dict((name, []) for name in names)
    for job in jobs:
        if job['state'] not in ACTIVE_JOB_STATES:
            continue
        for node in job['nodes']:
            if node in out and job['id'] not in out[node]:
                out[node].append(job['id'])
    return out


def hostlist(names):
    """The names as one hostlist argument (comma-separated; scontrol and squeue take that form)."""
    return ','.join(names)


def poll_commands(names):
    """The Slurm commands of one poll of ``names``, whatever their number: one ``scontrol show node -o`` and one
    ``squeue`` over the hostlist (2 RPCs to slurmctld)."""
    if not names:
        return []
    return [['scontrol', 'show', 'node', '-o', hostlist(names)],
            ['squeue', '-h', '-w', hostlist(names), '-o', SQUEUE_FORMAT]]


# --- our mark --------------------------------------------------------------------------------------------------

def check_run_id(run_id):
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id) or run_id == HEALTH:
        raise RollingError('nodeprep_rolling_run_id: {0!r} is not allowed; use 1 to 64 letters, digits, ".", "_" '
                           'or "-" (it goes into the Slurm reason nodeprep:<run id>:<phase>), not "{1}" (the '
                           'readiness verdict\'s reason nodeprep:{1}:<check ids>)'.format(run_id, HEALTH))
    return run_id


def format_reason(run_id, phase, checks=()):
    """``nodeprep:<run id>:<phase>``; ``verify-failed`` names the failed checks: ``...:verify-failed:a,b``."""
    check_run_id(run_id)
    if phase not in PHASES:
        raise RollingError('phase {0!r} is not one of {1}'.format(phase, ', '.join(PHASES)))
    reason = '{0}:{1}:{2}'.format(REASON_PREFIX, run_id, phase)
    if phase == 'verify-failed':
        reason += ':' + (','.join(checks) if checks else 'unknown')
    return reason


def strip_reason(reason):
    """A reason as set, without the `` [user@time]`` Slurm appends in ``scontrol show node`` (in any time format)."""
    return _REASON_TAIL_RE.sub('', reason or '').strip()


def split_notes(reason):
    """(our part, the notes slurmctld appended) of a reason: ``a : Not responding : reboot issued`` -> ``a``,
    ``['Not responding', 'reboot issued']``; None when a piece after the first is not one of SLURM_NOTES."""
    pieces = strip_reason(reason).split(' : ')
    notes = [p.strip() for p in pieces[1:]]
    if any(n not in SLURM_NOTES for n in notes):
        return None
    return pieces[0].strip(), notes


def reboot_notes(reason):
    """The notes slurmctld appended to a reason during ``scontrol reboot`` (SLURM_REBOOT_NOTES), in order."""
    return [p.strip() for p in strip_reason(reason).split(' : ')[1:] if p.strip() in SLURM_REBOOT_NOTES]


def parse_reason(reason, prefix=None):
    """Our reason -> {'run_id', 'phase', 'checks', 'notes'}; None for any other reason (an admin's, a health
    check's, Slurm's own). ``notes``: what slurmctld appended to it (SLURM_NOTES: our reboot, a node silent for
    SlurmdTimeout, an unexpected reboot), on every Slurm version."""
    split = split_notes(reason)
    if split is None:
        return None
    text, notes = split
    parts = text.split(':')
    if len(parts) < 3 or parts[0] != REASON_PREFIX or not RUN_ID_RE.match(parts[1]) or parts[2] not in PHASES:
        return None
    if parts[2] == 'verify-failed':
        checks = [c for c in ':'.join(parts[3:]).split(',') if c]
    elif len(parts) != 3:
        return None
    else:
        checks = []
    return {'run_id': parts[1], 'phase': parts[2], 'checks': checks, 'notes': notes}


def parse_marker(text):
    """MARKER's content (``run_id phase held original-reason...``, one line) -> dict, or None when empty/absent."""
    line = (text or '').strip().splitlines()
    if not line:
        return None
    fields = line[0].split(' ', 3)
    if len(fields) < 3 or not RUN_ID_RE.match(fields[0]) or fields[1] not in PHASES + ('taken',):
        return None
    return {'run_id': fields[0], 'phase': fields[1], 'held': fields[2] == 'held',
            'original_reason': fields[3] if len(fields) > 3 else ''}


def format_marker(run_id, phase, held=False, original_reason=''):
    check_run_id(run_id)
    return '{0} {1} {2} {3}\n'.format(run_id, phase, 'held' if held else 'ours', original_reason or '').rstrip() \
        + '\n'


# --- readiness's verdict in Slurm (nodeprep_readiness_slurm) ----------------------------------------------------

def format_health_reason(checks):
    """``nodeprep:health:<check ids>``: the reason of a node drained because readiness failed those checks."""
    ids = []
    for check in checks:
        if not isinstance(check, str) or not _CHECK_ID_RE.match(check):
            raise RollingError('check id {0!r} cannot go into a Slurm reason (letters, digits, ".", "_", "-")'.format(
                check))
        if check not in ids:
            ids.append(check)
    if not ids:
        raise RollingError('a health reason names at least one failed check')
    return '{0}:{1}:{2}'.format(REASON_PREFIX, HEALTH, ','.join(ids))


def parse_health_reason(reason):
    """Our health reason (with the notes slurmctld may append) -> {'checks', 'notes'}; None for any other."""
    split = split_notes(reason)
    if split is None:
        return None
    text, notes = split
    prefix = '{0}:{1}:'.format(REASON_PREFIX, HEALTH)
    if not text.startswith(prefix):
        return None
    checks = text[len(prefix):].split(',')
    if not all(_CHECK_ID_RE.match(c) for c in checks):
        return None
    return {'checks': checks, 'notes': notes}


def health_action(record, failed):
    """What readiness's verdict does to one node in Slurm (nodeprep_readiness_slurm=drain), from its record
    (parse_nodes) and ``failed`` (the ids of its failed checks; None: the node was not judged, unreachable or not
    checked). Returns {'action', 'reason', 'why'}; action is one of:

    * 'drain': it failed, has no reason (or only a stale one of ours) and nothing else holds it: drained with
      ``nodeprep:health:<ids>``;
    * 'update': drained by an earlier verdict of ours, failing other checks now: the reason is rewritten;
    * 'keep': drained by our verdict, failing the same checks;
    * 'resume': drained (or DOWN) with our health reason, it passes now, no reboot pending: resumed;
    * 'none': nothing to do (passes and is not ours, or not judged);
    * 'skip': it failed but is not ours to act on: another party's reason (an admin's, a health check's, Slurm's
      own), a rolling maintenance run's reason, DOWN, FAIL, a reboot pending, power saving, or drained without a
      reason or in a maintenance reservation. The rule of LBNL NHC's helpers (mej/nhc helpers/node-mark-offline and node-mark-online: act only on
      a node with no note or NHC's own "NHC:" note, never on a pending reboot; azurehpc-health-checks marks nodes
      through them).
    """
    status = node_status(record)
    raw = strip_reason(record.get('Reason', ''))
    raw = '' if raw in ('none', '(null)') else raw
    ours = parse_health_reason(raw)
    in_force = ours is not None and not status['usable']
    state = 'State={0}{1}'.format(status['state'], ' Reason={0}'.format(raw) if raw else '')
    if failed is None:
        return {'action': 'none', 'reason': '', 'why': 'not judged (unreachable or not checked): left as it is'}
    if not failed:
        if in_force and not status['reboot_pending']:
            return {'action': 'resume', 'reason': '', 'why': 'passes every check; drained by our verdict ({0}): '
                    'resumed'.format(','.join(ours['checks']))}
        if in_force:
            return {'action': 'none', 'reason': '', 'why': 'passes, but a reboot is pending ({0}): RESUME would '
                    'cancel it'.format(state)}
        return {'action': 'none', 'reason': '', 'why': 'passes'}
    reason = format_health_reason(failed)
    if status['reboot_pending']:
        return {'action': 'skip', 'reason': '', 'why': 'fails {0}, but a reboot is pending ({1}): left to it'.format(
            ','.join(failed), state)}
    if in_force:
        if set(ours['checks']) == set(failed):
            return {'action': 'keep', 'reason': '', 'why': 'still fails {0}: stays drained'.format(','.join(failed))}
        return {'action': 'update', 'reason': reason, 'why': 'still drained by our verdict, now failing {0}'.format(
            ','.join(failed))}
    if status['ours'] is not None:
        return {'action': 'skip', 'reason': '', 'why': 'fails {0}, but rolling maintenance run {1} holds it ({2}); '
                'that run verifies it'.format(','.join(failed), status['ours']['run_id'], state)}
    free = not raw or ours is not None or status['stale_reason']
    blocked = [f for f in status['flags'] if f in ('DRAIN', 'FAIL', 'MAINTENANCE') + POWER_FLAGS]
    blocked += ['DOWN'] if status['down'] else []
    blocked += [status['base']] if status['base'] in ('FUTURE', 'UNKNOWN') else []
    if free and not blocked:
        return {'action': 'drain', 'reason': reason, 'why': 'fails {0}: drained'.format(','.join(failed))}
    return {'action': 'skip', 'reason': '', 'why': 'fails {0}, but it is not ours to drain ({1})'.format(
        ','.join(failed), state)}


# --- the lock of a run -----------------------------------------------------------------------------------------

def lock_path(cluster):
    """The lock of the runs on ``cluster`` (ClusterName of scontrol show config) on the Slurm controller host."""
    name = re.sub(r'[^A-Za-z0-9._-]', '_', cluster or 'cluster')
    return '{0}/rolling-{1}.lock'.format(LOCK_DIR, name)


def format_lock(run_id, controller, pid, since):
    """The lock's content (the link's target): ``<run id>@<controller host>.<pid>:<since>``."""
    check_run_id(run_id)
    return '{0}@{1}.{2}:{3}'.format(run_id, controller, int(pid), int(since))


def parse_lock(text):
    """format_lock's text -> {'run_id', 'controller', 'pid', 'since'}, or None when absent or not ours."""
    m = re.match(r'^([A-Za-z0-9._-]{1,64})@(.+)\.([0-9]+):([0-9]+)\Z', (text or '').strip())
    if not m:
        return None
    return {'run_id': m.group(1), 'controller': m.group(2), 'pid': int(m.group(3)), 'since': int(m.group(4))}


def lock_decision(held, run_id, controller, alive):
    """What a run does with the cluster's lock: 'take' (free), 'ours' (this run id holds it: a rerun after an
    interruption), 'stale' (held by a run of this controller whose process is gone: taken over), 'refuse'.

    ``held``: parse_lock of the lock's content, or None when there is no lock; ``alive``: whether the holder's
    process runs (only known when the holder is this controller; None otherwise)."""
    if held is None:
        return 'take'
    if held['run_id'] == run_id:
        return 'ours'
    if held['controller'] == controller and alive is False:
        return 'stale'
    return 'refuse'


# --- one node --------------------------------------------------------------------------------------------------

def node_status(record):
    """What Slurm says of a node (a record of parse_nodes): base state, flags, reason, ours, held, drained.

    A reason counts only while the node is out of service (DRAIN, DOWN, FAIL, a reboot pending, not usable): Slurm
    >= 23.11 without accounting storage keeps the reason of a node that returned to service until a job is allocated
    there (accounting_storage.c, commit 332d015ef3), so a reason of ours on a usable node is a stale one. Another
    party's reason on a usable node still holds it (a health check may set a reason without draining)."""
    state = record.get('State', '')
    parts = [p for p in state.split('+') if p]
    base = parts[0].rstrip('*~#!%$@^-') if parts else 'UNKNOWN'
    flags = parts[1:]
    if parts and parts[0] != base and parts[0].endswith('*') and 'NOT_RESPONDING' not in flags:
        flags.append('NOT_RESPONDING')
    reason = strip_reason(record.get('Reason', ''))
    if reason in ('none', '(null)'):
        reason = ''
    drain = 'DRAIN' in flags
    completing = 'COMPLETING' in flags or base == 'COMPLETING'
    reboot = [f for f in flags if f in REBOOT_FLAGS]
    usable = base in USABLE_BASES and not any(f in HELD_FLAGS for f in flags)
    ours = parse_reason(reason)
    stale = ''
    if ours is not None and usable:
        # Ours, on a node back in service: left over after our resume (24.11 keeps it), not a phase of a run.
        stale, ours, reason = reason, None, ''
    held = base in ('DOWN', 'FUTURE', 'UNKNOWN', 'ERROR', 'INVAL') or any(f in HELD_FLAGS for f in flags) or \
        (bool(reason) and ours is None)
    return {
        'state': state,
        'base': base,
        'flags': flags,
        'reason': reason,
        'stale_reason': stale,
        'ours': ours,
        'drain': drain,
        # DRAINED in sinfo: drained and no job left (IDLE+DRAIN, DOWN+DRAIN); MIXED/ALLOCATED+DRAIN is DRAINING.
        'drained': drain and base not in BUSY_BASES and not completing,
        'completing': completing,
        'down': base == 'DOWN',
        'reboot_pending': bool(reboot),
        'held': held and ours is None,
        'usable': usable,
        'partitions': [p for p in record.get('Partitions', '').split(',') if p],
    }


def disruptive(plans):
    """Whether a node's plans need it drained: the kernel or nvidia_driver plan has reasons or a reboot."""
    out = []
    for role in ('kernel', 'nvidia_driver'):
        plan = (plans or {}).get(role) or {}
        out.extend('{0}: {1}'.format(role, r) for r in plan.get('reasons') or [])
        if (plan.get('reboot') or {}).get('needed'):
            why = (plan.get('reboot') or {}).get('why') or ['reboot']
            out.extend('{0}: reboot ({1})'.format(role, w) for w in why)
    return out


def reboot_needed(plans):
    """Whether the kernel or nvidia_driver plan says a reboot is needed."""
    return any(((plans or {}).get(role) or {}).get('reboot', {}).get('needed') for role in ('kernel', 'nvidia_driver'))


def settings_work(plans):
    """The settings roles' reasons (they run in place, without a drain)."""
    out = []
    for role, plan in sorted((plans or {}).items()):
        if role in ('kernel', 'nvidia_driver') or not isinstance(plan, dict):
            continue
        out.extend('{0}: {1}'.format(role, r) for r in plan.get('run') or [])
    return out


def decide(name, plans, marker, record, options, status=None):
    """The state of one node at the start of a run.

    ``plans``: ansible_facts.nodeprep_plans of the node; ``marker``: parse_marker of MARKER on the node (or None);
    ``record``: its parse_nodes record (None: Slurm was not asked, or does not know the node); ``options``:
    ``include_held``, ``retry_failed``; ``status``: node_status of ``record`` when known already.
    Returns {'node', 'state', 'start', 'why', 'changes', 'ours', 'held', 'original_reason', 'slurm_state',
    'reboot_needed'}; ``start`` is the first step to run: drain, wait, work, verify or None.
    """
    changes = disruptive(plans)
    settings = settings_work(plans)
    out = {'node': name, 'changes': changes or settings, 'disruptive': bool(changes), 'ours': False, 'held': False,
           'original_reason': '', 'slurm_state': None, 'start': None, 'why': '', 'reboot_needed': reboot_needed(plans),
           'down': False}
    if not changes and marker is None:
        out['state'] = 'in-place' if settings else 'on-target'
        out['why'] = 'settings only: run in place, not drained' if settings else 'nothing to do'
        return out
    if record is None:
        out['state'] = 'skipped-held'
        out['why'] = 'Slurm does not know the node (scontrol show node gave no record)'
        return out
    status = status or node_status(record)
    out['slurm_state'] = status['state']
    out['down'] = status['down']
    ours = status['ours']
    if ours is not None:
        # Ours (this run's or an interrupted one's): pick it up at its recorded phase; never drained again.
        out['ours'] = True
        phase = ours['phase']
        notes = ' ({0})'.format(', '.join(ours['notes'])) if ours['notes'] else ''
        if phase == 'drain':
            out.update(state='draining', start='wait', why='drained by run {0}{1}: wait until empty'.format(
                ours['run_id'], notes))
        elif phase == 'work':
            out.update(state='work', start='work', why='run {0} stopped in work{1}: work again'.format(
                ours['run_id'], notes))
        elif phase == 'reboot':
            # The roles are idempotent; reboot_step then waits for a reboot still pending, never asks a second one.
            out.update(state='work', start='work', why='run {0} stopped in its Slurm reboot ({1}): work again'.format(
                ours['run_id'], ', '.join(ours['notes']) or 'requested'))
        elif phase == 'verify':
            out.update(state='verify', start='verify', why='run {0} stopped in verify{1}'.format(
                ours['run_id'], notes))
        elif options.get('retry_failed'):
            out.update(state='work', start='work', why='failed verification in run {0} ({1}): retried'.format(
                ours['run_id'], ','.join(ours['checks'])))
        else:
            out.update(state='verify', start='verify', why='failed verification in run {0} ({1}): verify '
                       'only (nodeprep_rolling_retry_failed retries the work)'.format(
                           ours['run_id'], ','.join(ours['checks'])))
        return out
    if marker is not None and marker['held'] and status['held'] and options.get('include_held'):
        # A held node we worked on earlier (include_held), still held: its state is not ours; go on from the marker.
        # Without include_held, or back in service, the marker is old news: Slurm's state decides below.
        out.update(held=True, original_reason=status['reason'], state='work' if marker['phase'] == 'work' else
                   'verify' if marker['phase'] in ('verify', 'verify-failed') else 'candidate',
                   start='work' if marker['phase'] in ('work', 'taken', 'drain') else 'verify',
                   why='held node worked on by run {0}; its state and reason are left as they are'.format(
                       marker['run_id']))
        if marker['phase'] in ('taken', 'drain'):
            out['start'] = 'wait'
        return out
    if status['held']:
        why = 'held by someone else: State={0}{1}'.format(
            status['state'], ' Reason={0}'.format(status['reason']) if status['reason'] else '')
        if status['reboot_pending']:
            why += ' (reboot pending)'
        if not options.get('include_held'):
            out.update(state='skipped-held', why=why + '; nodeprep_rolling_include_held works on it')
            return out
        if not changes:
            out.update(state='on-target', why='marker of run {0} left, nothing disruptive to do'.format(
                marker['run_id']))
            return out
        out.update(state='candidate', start='wait', held=True, original_reason=status['reason'],
                   why=why + '; worked on (include_held) without taking its state: never resumed by us')
        return out
    if not changes:
        # The marker is ours but Slurm shows no reason of ours (lost, or the run stopped before the drain) and the
        # plans have nothing disruptive left: nothing to drain for.
        out.update(state='on-target', why='marker of run {0} left, nothing disruptive to do'.format(
            marker['run_id']))
        return out
    out.update(state='candidate', start='drain', why='disruptive work: drain, work, verify, resume')
    return out


def after_wait(decision, jobs, timed_out, policy):
    """The state after waiting for a node to empty: 'drained', or under the busy policy 'busy' (skip: resume it if
    ours), 'draining' (wait: keep waiting) or 'failed' (fail: stop the run)."""
    if policy not in BUSY_POLICIES:
        raise RollingError('nodeprep_rolling_busy: {0!r} is not one of {1}'.format(policy, ', '.join(BUSY_POLICIES)))
    if not jobs:
        return 'drained'
    if not timed_out or policy == 'wait':
        return 'draining'
    return 'busy' if policy == 'skip' else 'failed'


def node_empty(record, jobs):
    """Whether a node of a batch is empty for the work: no active job on it and none completing, and, when the
    reason is ours, drained (DRAINED in sinfo). A node someone else holds (include_held) counts as empty when no job
    runs there, DRAIN or not (DOWN, FAIL, MAINTENANCE without DRAIN take no job that would end by itself)."""
    status = node_status(record)
    if jobs or status['completing']:
        return False
    if status['ours'] is not None:
        return status['drained'] or (status['down'] and not status['drain'])
    return True


def reboot_how(mode, held):
    """Who reboots a node of the run (nodeprep_rolling_reboot): 'roles' or 'slurm'.

    A held node (include_held) is always rebooted by the roles: ``scontrol reboot nextstate=DOWN`` would clear its
    DRAIN flag and append to its reason (scontrol.1 of 22.05, ``reboot``), and its state is not ours to change."""
    if mode not in REBOOT_MODES:
        raise RollingError('nodeprep_rolling_reboot: {0!r} is not one of {1}'.format(mode, ', '.join(REBOOT_MODES)))
    return 'roles' if held else mode


def reboot_step(record, reboot_required):
    """The next step of a Slurm reboot for one node of ours, from its record (parse_nodes):

    * 'none': the roles asked for no reboot and no reboot of ours is under way;
    * 'request': ask Slurm (``scontrol reboot nextstate=DOWN reason=nodeprep:<run id>:reboot``);
    * 'wait': a reboot is requested or issued (REBOOT_REQUESTED / REBOOT_ISSUED), or issued and not yet complete;
    * 'complete': the node registered again after our reboot (``reboot complete``, DOWN, no reboot flag);
    * 'timed-out': slurmctld gave up (``reboot timed out``: not registered within ResumeTimeout).
    A reboot already asked in an earlier run is waited for, never asked a second time."""
    status = node_status(record)
    ours = status['ours']
    notes = ours['notes'] if ours else []
    under_way = ours is not None and ours['phase'] == 'reboot'
    if under_way and 'reboot timed out' in notes:
        return 'timed-out'
    if status['reboot_pending']:
        return 'wait'
    if under_way and 'reboot complete' in notes:
        return 'complete'
    if under_way:
        # Asked, not issued yet or issued and the node not registered: the flags tell; without them and without a
        # note Slurm dropped the request (State=RESUME cancels it): ask again only if the roles still need it.
        if 'reboot issued' in notes:
            return 'wait'
        return 'request' if reboot_required else 'none'
    return 'request' if reboot_required else 'none'


def may_resume(record, run_id_any=True):
    """Whether we may resume a node: its reason is ours and in force (the node is out of service) and no reboot is
    pending (State=RESUME would cancel it)."""
    status = node_status(record)
    return status['ours'] is not None and not status['reboot_pending']


def back_in_service(record):
    """IDLE, MIXED or ALLOCATED without DRAIN/DOWN/FAIL: the node takes jobs again."""
    return node_status(record)['usable']


def failed_checks(checks):
    """The ids of the readiness checks that failed (readiness_info's checks)."""
    return [c.get('id', '?') for c in checks or [] if c.get('status') == 'fail']


def stop_run(failed_count, max_failed):
    """The run stops when more than nodeprep_rolling_max_failed nodes failed verification."""
    return failed_count > max_failed


# --- the run ---------------------------------------------------------------------------------------------------

def batch_size(batch, count):
    """nodeprep_rolling_batch (a count, or a percentage of the nodes to work on) -> nodes per batch, as Ansible's
    ``serial`` computes it (a percentage rounds down, at least 1). Digits are ASCII digits only (a superscript two
    is not 2)."""
    text = str(batch).strip()
    m = _PERCENT_RE.match(text)
    if m:
        pct = int(m.group(1))
        if pct < 1 or pct > 100:
            raise RollingError('nodeprep_rolling_batch: {0!r} is not allowed; a percentage is 1% to 100%'.format(
                batch))
        return max(1, int(pct / 100.0 * count))
    if isinstance(batch, bool) or not _COUNT_RE.match(text) or int(text) < 1:
        raise RollingError('nodeprep_rolling_batch: {0!r} is not allowed; give a count (1 or more) or a percentage '
                           '("25%")'.format(batch))
    return int(text)


def batches(names, batch):
    """The nodes to work on, in order, cut into batches."""
    names = list(names)
    if not names:
        return []
    size = batch_size(batch, len(names))
    return [names[i:i + size] for i in range(0, len(names), size)]


def partition_members(records, statuses=None):
    """{partition: [node names]} of every node Slurm knows."""
    members = {}
    for name, record in records.items():
        status = (statuses or {}).get(name) or node_status(record)
        for part in status['partitions']:
            members.setdefault(part, []).append(name)
    return members


def drain_allowed(records, batch, min_available, statuses=None, members=None, label='batch'):
    """The problems of draining ``batch`` now (empty: go on): a partition the batch touches would keep fewer usable
    nodes (IDLE, MIXED or ALLOCATED with no flag that holds it: nodes that failed verification stay drained and do
    not count) outside the batch than ``min_available``. Checked on Slurm's answer of the moment before every drain,
    and on the first answer for every batch in the preflight."""
    statuses = statuses or dict((n, node_status(r)) for n, r in records.items())
    members = members if members is not None else partition_members(records, statuses)
    inside = set(batch)
    problems = []
    for part in sorted(members):
        nodes = members[part]
        if not inside.intersection(nodes):
            continue
        usable = [n for n in nodes if statuses[n]['usable'] and n not in inside]
        if len(usable) < min_available:
            shown = ', '.join(usable[:20]) + (' and {0} more'.format(len(usable) - 20) if len(usable) > 20 else '')
            problems.append('{0} ({1}) would leave partition {2} with {3} usable node(s) ({4}); '
                            'nodeprep_rolling_min_available is {5}'.format(
                                label, ', '.join(batch), part, len(usable), shown or 'none', min_available))
    return problems


def preflight(config, partitions, records, batch_list, reboot_timeout, min_available, decisions=(), statuses=None):
    """The reasons the run must not start (empty: go on).

    ``config``: parse_config; ``partitions``: parse_partitions; ``records``: parse_nodes of every node Slurm knows;
    ``batch_list``: batches of the nodes to drain; ``reboot_timeout``: the longest reboot timeout of the roles, in
    seconds; ``min_available``: usable nodes each partition must keep during a batch; ``decisions``: the decisions
    of the nodes worked on (decide, with ``reboot``: who reboots them).

    * Slurm reboots (``reboot: slurm``): RebootProgram must be set, and ResumeTimeout (global, or a partition's)
      must not be shorter than the reboot timeout, or slurmctld gives up on a node still booting ("reboot timed
      out") and keeps it DOWN.
    * Reboots by the roles: SlurmdTimeout matters only where it loses a node. A node of ours silent for longer is
      set DOWN and, from 23.02, gets " : Not responding" after our reason: still ours, resumed by the run. A held
      node (include_held, rebooted by the roles, not DOWN already) on Slurm >= 23.02 gets that note after its
      owner's reason and comes back DOWN, which the run never undoes: refused when the reboot timeout exceeds
      SlurmdTimeout (unless SlurmdTimeout is 0: never).
    """
    problems = []
    statuses = statuses or dict((n, node_status(r)) for n, r in records.items())
    members = partition_members(records, statuses)
    by_slurm = [d for d in decisions if d.get('start') and d.get('reboot') == 'slurm']
    if by_slurm:
        program = (config.get('RebootProgram') or '').strip()
        if program in ('', '(null)'):
            problems.append('nodeprep_rolling_reboot is slurm but slurm.conf sets no RebootProgram (scontrol show '
                            'config: RebootProgram={0}); scontrol reboot would never reboot {1}; set RebootProgram '
                            'or use nodeprep_rolling_reboot=roles'.format(
                                program or '(none)', ', '.join(d['node'] for d in by_slurm[:10])))
        global_timeout = parse_seconds(config.get('ResumeTimeout'))
        if global_timeout is None:
            problems.append('scontrol show config gave no ResumeTimeout (got {0!r})'.format(
                config.get('ResumeTimeout')))
        elif global_timeout < reboot_timeout:
            problems.append('ResumeTimeout={0} s (slurm.conf) is shorter than the reboot timeout {1} s '
                            '(nodeprep_kernel_reboot_timeout, nodeprep_nvidia_driver_reboot_timeout): a node still '
                            'rebooting would be marked DOWN; raise ResumeTimeout or lower the reboot timeouts'.format(
                                global_timeout, reboot_timeout))
        worked = set(d['node'] for d in by_slurm)
        for part, kv in sorted(partitions.items()):
            if not worked.intersection(members.get(part, [])):
                continue
            timeout = parse_seconds(kv.get('ResumeTimeout'))
            if timeout is not None and timeout < reboot_timeout:
                problems.append('partition {0}: ResumeTimeout={1} s is shorter than the reboot timeout {2} s'.format(
                    part, timeout, reboot_timeout))
    version = slurm_version(config)
    slurmd_timeout = parse_seconds(config.get('SlurmdTimeout'))
    held_reboots = [d for d in decisions if d.get('start') and d.get('held') and d.get('reboot') == 'roles' and
                    d.get('reboot_needed') and not d.get('down')]
    if held_reboots and slurmd_timeout and reboot_timeout > slurmd_timeout and \
            (version is None or version >= NOTES_APPENDED_FROM):
        problems.append('held node(s) {0} would be rebooted by the roles for up to {1} s (nodeprep_kernel_reboot_'
                        'timeout, nodeprep_nvidia_driver_reboot_timeout), longer than SlurmdTimeout={2} s: Slurm {3} '
                        'would set them DOWN and append "Not responding" to their owner\'s reason, and this run never '
                        'resumes a node it does not hold; lower the reboot timeouts to {2} s or less, raise '
                        'SlurmdTimeout, or leave nodeprep_rolling_include_held off'.format(
                            ', '.join('{0} (State={1})'.format(d['node'], d.get('slurm_state')) for d in held_reboots),
                            reboot_timeout, slurmd_timeout, config.get('SLURM_VERSION') or '(version unknown)'))
    for i, batch in enumerate(batch_list):
        problems.extend(drain_allowed(records, batch, min_available, statuses, members,
                                      label='batch {0}'.format(i + 1)))
    return problems


def summary(changes):
    """``nvidia_driver: x; nvidia_driver: reboot (y); shm: z`` -> ``nvidia_driver (2, reboot), shm (1)``."""
    roles = []
    counts = {}
    reboot = set()
    for change in changes:
        role, _sep, what = change.partition(': ')
        if role not in counts:
            roles.append(role)
            counts[role] = 0
        if what.startswith('reboot ('):
            reboot.add(role)
        else:
            counts[role] += 1
    return ', '.join('{0} ({1}{2})'.format(r, counts[r], ', reboot' if r in reboot else '') for r in roles) or '-'


def table(decisions, batch_of, jobs):
    """Rows of the plan table: node, state, what changes, Slurm state, jobs, batch, why."""
    rows = []
    for d in decisions:
        rows.append({
            'node': d['node'],
            'state': d['state'],
            'changes': summary(d['changes']),
            'slurm': d['slurm_state'] or '-',
            'jobs': ','.join(jobs.get(d['node']) or []) or '-',
            'batch': batch_of.get(d['node'], '-'),
            'why': d['why'],
        })
    return rows


def format_table(rows):
    """The plan table as text (one line a node)."""
    heads = ('node', 'state', 'batch', 'slurm', 'jobs', 'changes')
    cells = [[str(r[h]) for h in heads] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    lines = ['  '.join(h.ljust(widths[i]) for i, h in enumerate(heads)).rstrip()]
    for c in cells:
        lines.append('  '.join(c[i].ljust(widths[i]) for i in range(len(heads))).rstrip())
    return '\n'.join(lines) + '\n'


def plan_run(nodes, slurm, options):
    """The whole plan of a run.

    ``nodes``: [{'node', 'plans', 'marker'}] in play order (``marker``: MARKER's text or None); ``slurm``: the
    backend's state answer ({'records', 'config', 'partitions', 'jobs'}) or None when it was not asked;
    ``options``: run_id, batch, include_held, retry_failed, min_available, reboot_timeout, busy, max_failed,
    reboot (REBOOT_MODES; each decision of a node worked on gets ``reboot``: reboot_how).
    Returns {'need_slurm': nodes Slurm must be asked about, 'decisions', 'work': nodes to take through the run in
    order, 'batches', 'batch_size', 'batch_of', 'polls': per batch the Slurm commands of one poll of it
    (poll_commands), 'rows', 'text', 'problems'}.  With ``slurm`` None only ``need_slurm`` counts.
    """
    check_run_id(options['run_id'])
    if options.get('busy', 'skip') not in BUSY_POLICIES:
        raise RollingError('nodeprep_rolling_busy: {0!r} is not one of {1}'.format(
            options.get('busy'), ', '.join(BUSY_POLICIES)))
    reboot_mode = options.get('reboot', 'roles')
    if reboot_mode not in REBOOT_MODES:
        raise RollingError('nodeprep_rolling_reboot: {0!r} is not one of {1}'.format(
            reboot_mode, ', '.join(REBOOT_MODES)))
    for key in ('min_available', 'max_failed', 'reboot_timeout'):
        value = options.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RollingError('nodeprep_rolling_{0}: {1!r} is not allowed; give a whole number, 0 or more'.format(
                key, value))
    batch_size(options.get('batch', 1), 1)
    need = [n['node'] for n in nodes if disruptive(n['plans']) or parse_marker(n.get('marker')) is not None]
    out = {'need_slurm': need, 'decisions': [], 'work': [], 'batches': [], 'batch_size': 0, 'batch_of': {},
           'polls': [], 'rows': [], 'text': '', 'problems': []}
    if slurm is None and need:
        return out
    records = (slurm or {}).get('records') or {}
    statuses = dict((name, node_status(record)) for name, record in records.items())
    decisions = []
    for n in nodes:
        marker = parse_marker(n.get('marker'))
        record = records.get(n['node']) if slurm is not None else None
        d = decide(n['node'], n['plans'], marker, record, options, status=statuses.get(n['node']))
        d['marker'] = format_marker(options['run_id'], 'taken', d['held'], d['original_reason']) \
            if d['start'] else ''
        d['reboot'] = reboot_how(reboot_mode, d['held']) if d['start'] else None
        decisions.append(d)
    by_name = dict((d['node'], d) for d in decisions)
    work = [d['node'] for d in decisions if d['start']]
    batch_list = batches(work, options.get('batch', 1))
    batch_of = dict((name, i + 1) for i, b in enumerate(batch_list) for name in b)
    # Only the nodes we drain leave a partition; held and already-drained nodes count as not usable anyway.
    to_drain = [[name for name in b if by_name[name]['start'] == 'drain'] for b in batch_list]
    problems = preflight((slurm or {}).get('config') or {}, (slurm or {}).get('partitions') or {}, records,
                         [b for b in to_drain if b], options.get('reboot_timeout', 0),
                         options.get('min_available', 0), decisions=decisions, statuses=statuses) if work else []
    jobs = (slurm or {}).get('jobs') or {}
    rows = table(decisions, batch_of, jobs)
    out.update(decisions=decisions, work=work, batches=batch_list,
               batch_size=batch_size(options.get('batch', 1), len(work)) if work else 0, batch_of=batch_of,
               polls=[poll_commands(b) for b in batch_list], rows=rows, text=format_table(rows), problems=problems)
    return out
