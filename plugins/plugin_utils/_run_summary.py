# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
"""The end-of-run summary of playbooks/site.yml: pure functions, no Ansible import (the run_summary action plugin is
their only caller).

* ``record(plans, roles, before)``: what each role's plan said when site.yml decided to run it (the changes it makes,
  or would make in check mode; the reboot it needs; the GPU rule's line), kept per host as
  ``nodeprep_run_record`` because the roles plan again after their work.
* ``error_of(role, task, result)``: the first error of a role on a host, with the variable to set when the error is
  one this collection knows (``hint``).
* ``limit_of(result)``: which limit of a run stopped a node's remote step (the SSH connect limit, the whole gather's,
  a command's), from the failed task's result; ``command_limits(timed_out)`` the commands killed at their limit in a
  gather that went on.
* ``build(hosts, alive, nodes, check_mode)``: the summary (nodes changed, nodes that need a reboot and why, nodes
  failed with their first error, nodes that are not GPU nodes, nodes that hit a limit), ``render(summary)`` its lines.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node

FILE_NAME = 'run-summary.json'
# The host fact that keeps what record() returns (gpufleet.nodeprep.run_summary record, node_plan record).
RECORD_FACT = 'nodeprep_run_record'
VERSION = 1
# The keys of a summary that list hosts, in the order of its counts line.
KEYS = ('changed', 'reboot', 'failed', 'no_gpu', 'limits', 'unchanged')
# The limits of a run's remote steps (docs/performance.md, "A hung node costs only itself"): the variable that sets
# each.  A command's limit is named by the module option it came from.
LIMIT_VARIABLES = {
    'ssh_connect': 'ansible_ssh_timeout',
    'gather': 'nodeprep_gather_timeout',
    'command_timeout': 'nodeprep_command_timeout',
    'nvidia_timeout': 'nvidia-smi timeout (nodeprep_readiness_nvidia_timeout in readiness)',
    'dcgm_timeout': 'nodeprep_readiness_dcgm_timeout',
}
# The roles that depend on the NVIDIA driver's result: in check mode, a node whose driver prediction failed gets no
# prediction of these (the others are predicted as usual).
DRIVER_DEPENDENT = ('imex', 'gpu_settings')

# The run summary names what to do only for a failure it recognises, from the words of the tool that failed; any
# other failure gets no hint (a hint that does not fit sends the admin after the wrong variable).
#
# A download that failed (the network, a mirror, a wrong URL), as each tool words it: dnf 4 and librepo ("Failed to
# download metadata for repo 'cuda-rhel9': Cannot download repomd.xml", "Curl error (6): Couldn't resolve host
# name", "All mirrors were tried"), dnf 5 ("Failed to download metadata (baseurl: ...) for repository
# \"cuda-rhel10\"", "Librepo error"), apt ("Failed to fetch <url>", "Temporary failure resolving", "Could not
# connect to", "Could not resolve"), Ansible's get_url and uri (module_utils/urls.py fetch_url: "Request failed:
# <url...open error [Errno 113] No route to host>", "Connection failure: ..."; get_url with a 404: "Request failed").
# A bare "timed out" is not one: nvidia-smi, systemd and the reboot time out too.
_DOWNLOAD_FAILED = (r'failed to download metadata|cannot download|all mirrors were tried|curl error|librepo error|'
                    r'failed to fetch|temporary failure resolving|could not resolve|could not connect to|'
                    r'url[o]pen error|request failed|connection failure|connection refused|no route to host|'
                    r'name or service not known|network is unreachable|status code was -1|'
                    r'(connection|operation|read operation) timed out|timeout was reached')
# What the failed download was: the repository ids and files the roles write, the default hosts and URLs.
_ELREPO = r'elrepo'
_EPEL = r'\bepel\b|rpm-gpg-key-epel'
_RUNFILE = r'nvidia-linux-[a-z0-9_]+-[0-9.]+\.run'
_CUDA_REPO = r'\bcuda-(rhel|ubuntu|debian|sles|fedora|amzn|azl)[0-9]+\b|developer\.download\.nvidia\.com|nodeprep-cuda'
_NO_PACKAGE = (r'no package .*(available|matching)|unable to locate package|nothing provides|no match for argument|'
               r'installation candidate|filtered out by exclude')
# The kernel role and the nvidia_driver role (its kernel_devel step) both install the devel/headers package.
_DEVEL = r'(kernel-(lt-|ml-)?devel|linux-headers|development tree)'
_DEVEL_HINT = ('the devel/headers package of the running kernel is in no repository the node has (a custom kernel?): '
               'install its headers yourself and set nodeprep_kernel_manage_devel: false')
# Ansible's reboot action when the node does not come back (plugins/action/reboot.py, do_until_success_or_timeout):
# "Timed out waiting for last boot time check (timeout=1800)" (the node never answered with a new boot id) and
# "Timed out waiting for post-reboot test command (timeout=1800)" (it booted, but runs no command).
_REBOOT_TIMEOUT = r'timed out waiting for (?P<step>last boot time check|post-reboot test command) \(timeout=(?P<timeout>[0-9]+)\)'
_REBOOT_HINT = ('the node did not come back from the reboot within {timeout} s ({step} timed out): look at its console '
                'or BMC (a kernel or driver that hangs at boot, an initramfs that cannot mount the root, a long POST); '
                'a node that is only slow to boot needs a larger nodeprep_{role}_reboot_timeout')
_BOTH = ('kernel', 'nvidia_driver')
# (roles, what the error is about, the failure, the hint; {role} and the failure's named groups are filled in).
# The first row whose "about" and failure are both in the error's words (the devel rows: in the task's name or the
# error's words) gives the hint.
HINTS = (
    (_BOTH, r'', _REBOOT_TIMEOUT, _REBOOT_HINT),
    (_BOTH, _DEVEL, _NO_PACKAGE, _DEVEL_HINT),
    (('kernel',), _ELREPO, _DOWNLOAD_FAILED,
     'the node cannot reach ELRepo: set nodeprep_kernel_elrepo_url (and nodeprep_kernel_elrepo_gpgkey) to a mirror it '
     'can reach'),
    (('nvidia_driver',), _EPEL, _DOWNLOAD_FAILED,
     'the node cannot reach EPEL: set nodeprep_nvidia_driver_epel_url (and nodeprep_nvidia_driver_epel_gpgkey) to a '
     'mirror it can reach'),
    (('nvidia_driver',), _RUNFILE, _DOWNLOAD_FAILED,
     "the node cannot download NVIDIA's runfile: set nodeprep_nvidia_driver_runfile_url to a copy it can reach"),
    (('nvidia_driver',), _CUDA_REPO, _DOWNLOAD_FAILED,
     "the node cannot reach NVIDIA's repository: set nodeprep_nvidia_driver_repo_url (and "
     'nodeprep_nvidia_driver_repo_gpgkey) to a mirror it can reach'),
)
# The rows matched against the task's name as well as the error's words.
_TASK_ROWS = (_DEVEL,)


def _text(value):
    if value is None:
        return ''
    if isinstance(value, (list, tuple)):
        return '; '.join(_text(item) for item in value if _text(item))
    return str(value)


def _parts(result):
    """The words of one result: its msg, what dnf/apt list as failures, the last line of stderr, and for a task
    that looped, the same of each item that failed (the loop's own msg is only "One or more items failed"), with
    the URL a download item failed on."""
    parts = [_text(result.get('msg'))]
    for key in ('failures', 'results'):
        if isinstance(result.get(key), list):
            parts.extend(_text(item) for item in result[key] if isinstance(item, str))
    stderr = _text(result.get('stderr')).strip()
    if stderr:
        parts.append(stderr.splitlines()[-1])
    if result.get('url') and parts and str(result['url']) not in parts[0]:
        parts[0] = '{0} ({1})'.format(parts[0], result['url']) if parts[0] else str(result['url'])
    for item in result.get('results') if isinstance(result.get('results'), list) else []:
        if isinstance(item, dict) and item.get('failed'):
            parts.extend(_parts(item))
    return parts


def error_text(result):
    """The words of a failed task's result: its msg, then what dnf/apt list as failures, the end of stderr (and
    those of each failed item of a loop)."""
    result = result if isinstance(result, dict) else {}
    words = []
    for part in _parts(result):
        part = ' '.join(part.split())
        if part and part not in words:
            words.append(part)
    return '; '.join(words) or 'failed (no message)'


def hint(role, task, text):
    """What to do about an error this collection recognises, naming the variable to set (None for any other)."""
    message = (text or '').lower()
    with_task = '{0} {1}'.format(task or '', message).lower()
    for roles, about, pattern, words in HINTS:
        subject = with_task if about in _TASK_ROWS else message
        if role not in roles or not re.search(about, subject):
            continue
        match = re.search(pattern, subject)
        if match:
            return words.format(role=role, **match.groupdict())
    return None


def command_limits(timed_out):
    """The limits hit by commands killed at their limit (gpu_node_facts' ``timed_out``/``nodeprep_timed_out``)."""
    out = []
    for item in timed_out if isinstance(timed_out, list) else []:
        if not isinstance(item, dict) or not item.get('command'):
            continue
        option = str(item.get('option') or 'command_timeout')
        out.append({'limit': 'command', 'variable': LIMIT_VARIABLES.get(option, option),
                    'seconds': item.get('seconds'), 'what': str(item['command'])})
    return out


def limit_of(result):
    """The limits a failed remote step hit, from its result (``ansible_failed_result``): Ansible's task ``timeout``
    (``timedout.period``: the whole gather), the SSH connect limit (``limit`` set by the node_plan action on a
    connection that timed out), or the commands the gather killed (``timed_out``). [] when no limit was hit."""
    result = result if isinstance(result, dict) else {}
    found = []
    timedout = result.get('timedout')
    if isinstance(timedout, dict) and timedout.get('period') is not None:
        found.append({'limit': 'gather', 'variable': LIMIT_VARIABLES['gather'], 'seconds': timedout['period'],
                      'what': 'the whole remote step'})
    if isinstance(result.get('limit'), dict) and result['limit'].get('limit'):
        found.append(dict((key, result['limit'].get(key)) for key in ('limit', 'variable', 'seconds', 'what')))
    found.extend(command_limits(result.get('timed_out')))
    return found


def error_of(role, task, result):
    """``{'role', 'task', 'msg', 'hint', 'limits', 'unreachable'}`` of a role's failed task (``result``:
    ansible_failed_result). ``unreachable``: the node could not be reached (the node_plan action's
    ``nodeprep_unreachable``); the run leaves it as unreachable."""
    text = error_text(result)
    result = result if isinstance(result, dict) else {}
    return {'role': role, 'task': task or '', 'msg': text, 'hint': hint(role, task, text), 'limits': limit_of(result),
            'unreachable': bool(result.get('nodeprep_unreachable'))}


def unpredicted(errors, check_mode=True):
    """The roles check mode does not predict on a host after ``errors`` (role -> error): those that depend on the
    driver once the nvidia_driver role failed there (a real run stops the host at its first error instead)."""
    if not check_mode or not isinstance(errors, dict) or 'nvidia_driver' not in errors:
        return []
    return list(DRIVER_DEPENDENT)


def record(plans, roles, before=None):
    """``before`` (a host's nodeprep_run_record) with, for each of ``roles`` that ``plans`` (its
    ansible_facts.nodeprep_plans) has, what its plan says now: the changes (``reasons``), the reboot, the GPU line."""
    out = dict(before) if isinstance(before, dict) else {}
    plans = plans if isinstance(plans, dict) else {}
    for role in roles:
        plan = plans.get(role)
        if not isinstance(plan, dict):
            continue
        reboot = plan.get('reboot') if isinstance(plan.get('reboot'), dict) else {}
        out[role] = {'changes': [str(r) for r in plan.get('reasons') or []],
                     'reboot': [str(r) for r in reboot.get('why') or []] if reboot.get('needed') else [],
                     'reboot_allowed': bool(reboot.get('allowed')),
                     'gpu_skip': plan.get('gpu_skip') or None}
    return out


def _node(node):
    node = node if isinstance(node, dict) else {}
    errors = node.get('errors') if isinstance(node.get('errors'), dict) else {}
    return (node.get('record') if isinstance(node.get('record'), dict) else {}, errors,
            bool(node.get('reboot_required')), [str(r) for r in node.get('reboot_reasons') or []])


def counts(summary):
    """How many hosts each key of KEYS lists."""
    return dict((key, len(summary.get(key) or {})) for key in KEYS)


def build(hosts, alive, nodes, check_mode=False, roles=(), run_id=None):
    """The summary of a site.yml run.

    ``hosts``: every host of the run, in order (ansible_play_hosts_all).  ``alive``: those still in the run (not
    failed, not unreachable).  ``nodes``: host -> ``{'record': nodeprep_run_record, 'errors': nodeprep_run_errors
    (role -> error_of), 'reboot_required': nodeprep_reboot_required, 'reboot_reasons': nodeprep_reboot_reasons,
    'timed_out': nodeprep_timed_out}``. ``roles``: the roles in site.yml's order (the first error is the first of these
    that failed). ``run_id``: the run's id (_slices.identity).
    """
    alive = set(alive or [])
    summary = {'version': VERSION, 'check_mode': bool(check_mode), 'hosts': len(hosts), 'changed': {},
               'reboot': {}, 'failed': {}, 'no_gpu': {}, 'limits': {}, 'unchanged': [], 'run_id': run_id}
    for host in hosts:
        record_, errors, reboot_required, reboot_reasons = _node(nodes.get(host))
        limits = [limit for role in sorted(errors) for limit in (errors[role] or {}).get('limits') or []]
        limits.extend(limit for limit in command_limits((nodes.get(host) or {}).get('timed_out'))
                      if limit not in limits)
        if limits:
            summary['limits'][host] = limits
        order = [r for r in roles if r in errors] + sorted(r for r in errors if r not in roles)
        if order:
            summary['failed'][host] = dict(errors[order[0]], roles=order,
                                           not_predicted=unpredicted(errors, check_mode))
        elif host not in alive:
            summary['failed'][host] = {'role': None, 'task': None, 'msg': 'unreachable, or failed before site.yml '
                                       'could record the error (see the run output)', 'hint': None, 'roles': [],
                                       'not_predicted': []}
        skips = [r for r in _gpu_node.GPU_ROLES if (record_.get(r) or {}).get('gpu_skip')]
        if skips:
            summary['no_gpu'][host] = record_[skips[0]]['gpu_skip']
        changes = dict((role, list(item['changes'])) for role, item in record_.items()
                       if isinstance(item, dict) and item.get('changes') and role not in errors)
        if changes and host not in summary['failed']:
            summary['changed'][host] = changes
        elif changes:
            summary['failed'][host]['changes'] = changes
        why = list(reboot_reasons) if reboot_required else []
        if check_mode:
            for role in roles:
                item = record_.get(role) or {}
                why.extend(r for r in item.get('reboot') or [] if r not in why)
        if why:
            summary['reboot'][host] = why
        if host not in summary['failed'] and not changes and not why:
            summary['unchanged'].append(host)
    summary['counts'] = counts(summary)
    return summary


def _roles_text(changes, roles=()):
    """The roles that change, in site.yml's order (the reasons are in the JSON: a line per node stays short)."""
    return ', '.join([r for r in roles if r in changes] + sorted(r for r in changes if r not in roles))


def render(summary, roles=()):
    """The summary as lines a person reads (the run prints them once, at the end): the counts, then one line per
    node that changed (its roles), needs a reboot (why), failed (its first error) or is not a GPU node."""
    would = summary['check_mode']
    number = summary['counts']
    lines = ['{0} host(s){1}: {2} {3}, {4} {5} a reboot, {6} failed, {7} not GPU nodes, {8} unchanged{9}'.format(
        summary['hosts'], ' (check mode: what a run would do)' if would else '', number['changed'],
        'would change' if would else 'changed', number['reboot'], 'would need' if would else 'need',
        number['failed'], number['no_gpu'], number['unchanged'],
        ', {0} hit a limit'.format(number['limits']) if number.get('limits') else '')]
    for host, changes in sorted(summary['changed'].items()):
        lines.append('{0} {1}: {2}'.format('would change' if would else 'changed', host,
                                           _roles_text(changes, roles)))
    for host, why in sorted(summary['reboot'].items()):
        lines.append('reboot {0}: {1}'.format(host, '; '.join(why)))
    for host, error in sorted(summary['failed'].items()):
        where = '{0}: {1}: '.format(error['role'], error['task']) if error.get('role') else ''
        lines.append('failed {0}: {1}{2}{3}{4}'.format(
            host, where, error['msg'], ' -> ' + error['hint'] if error.get('hint') else '',
            ' (not predicted: {0})'.format(', '.join(error['not_predicted'])) if error.get('not_predicted') else ''))
    for host, line in sorted(summary['no_gpu'].items()):
        lines.append('no GPU {0}: {1}'.format(host, line))
    for host, limits in sorted((summary.get('limits') or {}).items()):
        lines.append('limit {0}: {1}'.format(host, '; '.join(limit_line(limit) for limit in limits)))
    return lines


def limit_line(limit):
    """``<what>: stopped at the <limit> limit of <N> s (<variable>)``."""
    seconds = limit.get('seconds')
    return '{0}: stopped at the {1} limit{2} ({3})'.format(
        limit.get('what') or limit.get('limit'), str(limit.get('limit')).replace('_', ' '),
        ' of {0} s'.format(seconds) if seconds is not None else '', limit.get('variable'))
