# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The memlock role's rule: its settings, what it gathers and its plan (see plans/_plan.py for the plan's shape).

The one rule for a limit (``_memlock.covers``): the role writes exactly the wanted value in its own files (the PAM
limits drop-in, the systemd manager drop-in, one drop-in per chosen service), compared by content; an effective
limit at least as large as wanted is not drift, a smaller one is.  When the role's own file is right and the
effective limit is still smaller, another file wins (a later limits.d file, a later system.conf.d drop-in): the role
does not edit files it does not own, so that is drift no run fixes (``fixable`` False), naming the file that wins;
the role's verification fails on it, and so does readiness.

Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _memlock
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _limits_conf
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan

ROLE = 'memlock'
USERS = 'memlock.users'
SERVICES = 'memlock.services'
CHECKS = (USERS, SERVICES)

SYSTEM_CONF_DIR = '/etc/systemd/system.conf.d'
UNIT_DIR = '/etc/systemd/system'
DROPIN_NAME = '90-nodeprep-memlock.conf'
MANAGER_DROPIN = SYSTEM_CONF_DIR + '/' + DROPIN_NAME
DIR_MODE = '0755'
FILE_MODE = '0644'

# The files pam_limits reads (pam_limits.c: LIMITS_FILE, then the glob LIMITS_CONF_GLOB; a glob * skips hidden names).
PAM_READS = re.compile(r'^/etc/security/(limits\.conf|limits\.d/[^/.][^/]*\.conf)$')
DOMAIN_RE = re.compile(r'^(\*|%|[@%]?[A-Za-z0-9_.][A-Za-z0-9_.:-]*)$')
SERVICE_RE = re.compile(r'^[A-Za-z0-9_.:@-]+$')
USER_RE = re.compile(r'^([A-Za-z0-9_.][A-Za-z0-9_.-]*\$?|\*)$')

VALUE_ALLOWED = ('allowed: "unlimited" or a positive number of KiB, as an integer or a string of digits (such as '
                 '65536)')
DOMAINS_ALLOWED = 'allowed: limits.conf(5) domains: a user, @group, %group, * or %'
SERVICES_ALLOWED = ('allowed: systemd service names such as slurmd or docker.service (letters, digits and _ . : @ -; '
                    'no spaces or slashes)')
USERS_ALLOWED = ('allowed: user names (letters, digits and _ . -), no spaces, or * (any non-root user that no user, '
                 '@group or uid-range line names)')
ANY_USER = _limits_conf.ANY_USER
SUBMIT_ALLOWED = ('allowed: null (not known), "unlimited" or a positive number of KiB, as an integer or a string of '
                  'digits')
FIX_SLURMD = ('give slurmd.service LimitMEMLOCK=infinity (nodeprep_memlock_services: [slurmd]; slurmd must be '
              'restarted to get it)')
FIX_PROPAGATION = ('set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf (jobs then get slurmd\'s limit) or raise '
                   'the login nodes\' memlock and set nodeprep_memlock_slurm_submit_limit to it')
FILE_ALLOWED = ('allowed: a file pam_limits reads, /etc/security/limits.conf or /etc/security/limits.d/<name>.conf '
                '(an absolute path, a name ending in .conf, not hidden)')

SETTINGS = {
    'nodeprep_memlock_limits': {
        'type': 'bool', 'default': True,
        'description': 'Write the PAM limits drop-in (login sessions, ssh, su, sudo).'},
    'nodeprep_memlock_domains': {
        'type': 'list', 'elements': 'str', 'default': ['*', 'root'],
        'description': ['limits.conf(5) domains that get the limit (a user, V(@group), V(%group), V(*)).',
                        'Wildcard and group lines do not apply to root, so V(root) is listed separately.',
                        'A string is one domain (C(-e nodeprep_memlock_domains=root)) or a comma-separated list.',
                        'At least one while O(nodeprep_memlock_limits) is true.']},
    'nodeprep_memlock_value': {
        'type': 'raw', 'default': 'unlimited',
        'description': ['The limit, V(unlimited) or a positive number of KiB (limits.conf units; an integer or a '
                        'string of digits).',
                        'Written as both soft and hard limit, exactly, in the files the role owns.',
                        'An effective limit at least as large counts as right; a smaller one does not.',
                        'V(0), negative numbers, V(-1), V(infinity), units (V(64G)) and fractions are refused before '
                        'anything changes.']},
    'nodeprep_memlock_limits_file': {
        'type': 'path', 'default': '/etc/security/limits.d/90-nodeprep-memlock.conf',
        'description': ['The PAM limits drop-in file. The role owns it and writes its whole content (one V(-) line, '
                        'soft and hard, per domain).',
                        'It must be a file pam_limits reads, C(/etc/security/limits.conf) or '
                        'C(/etc/security/limits.d/<name>.conf).',
                        'An absolute path, a name ending in C(.conf), not hidden; the role refuses any other before '
                        'it changes anything.',
                        'Pointing it at C(/etc/security/limits.conf) makes the role own that file too (its other '
                        'lines are replaced).']},
    'nodeprep_memlock_systemd_default': {
        'type': 'bool', 'default': True,
        'description': ['Set C(DefaultLimitMEMLOCK) for all systemd services (system.conf.d drop-in).',
                        'Applied with C(systemctl daemon-reexec); services started afterwards get it.']},
    'nodeprep_memlock_services': {
        'type': 'list', 'elements': 'str', 'default': [],
        'description': ['Services that get their own C(LimitMEMLOCK) drop-in, for example V(slurmd), V(docker), '
                        'V(containerd) (a name with or without C(.service); no spaces or slashes).']},
    'nodeprep_memlock_restart_services': {
        'type': 'bool', 'default': False,
        'description': ['Restart the services whose drop-in changed so that they run with the new limit now.',
                        'Off by default because restarting slurmd, docker or containerd disturbs running work.']},
    'nodeprep_memlock_verify_users': {
        'type': 'list', 'elements': 'str', 'default': ['root', '*'],
        'description': ['Users whose effective limit is checked in C(ansible_facts.limits.effective).',
                        'V(*) stands for the users jobs run as: any non-root user that no user, V(@group) or uid-range '
                        'line names, so only the V(*) lines reach it (a later V(* hard memlock 65536) in a site file '
                        'fails the check). Add real users to cover their group and uid-range lines too.']},
    'nodeprep_memlock_slurm_jobs': {
        'type': 'bool', 'default': True,
        'description': ['Where slurmd runs, check the memlock a Slurm job gets: slurmd\'s own limit '
                        '(C(/proc/<pid>/limits)) and, when Slurm propagates MEMLOCK (C(PropagateResourceLimits), '
                        'default V(ALL), read with C(scontrol show config)), the submitting shell\'s.',
                        'Fails readiness (C(memlock.services)) and the role\'s verification when a job would get less '
                        'than O(nodeprep_memlock_value), naming the fixes.']},
    'nodeprep_memlock_slurm_submit_limit': {
        'type': 'raw', 'default': None,
        'description': ['The soft memlock limit of the shells jobs are submitted from (the login nodes), V(unlimited) '
                        'or KiB, for nodes where Slurm propagates MEMLOCK.',
                        'A compute node cannot see it: null (the default) fails O(nodeprep_memlock_slurm_jobs) '
                        'wherever MEMLOCK is propagated; set C(PropagateResourceLimitsExcept=MEMLOCK) in slurm.conf '
                        'instead, or raise the login nodes\' limit and give it here.']},
    'nodeprep_memlock_verify': {
        'type': 'bool', 'default': True,
        'description': 'Check the effective limits (users, systemd default, services) at the end.'},
}


def wanted_value(value):
    """The limit a setting asks for: 'unlimited' or a positive int of KiB; ValueError for anything else."""
    if value == _limits_conf.UNLIMITED:
        return value
    if isinstance(value, bool):
        raise ValueError('not a limit')
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.isdigit():
        number = int(value)
    else:
        raise ValueError('not a limit')
    if number <= 0:
        raise ValueError('not a limit')
    if _limits_conf.parse_value('memlock', str(number)) == _limits_conf.UNLIMITED:
        raise ValueError('pam_limits reads it as unlimited')
    return number


def systemd_value(want):
    """LimitMEMLOCK= / DefaultLimitMEMLOCK= for a wanted limit."""
    return 'infinity' if want == _limits_conf.UNLIMITED else '{0}K'.format(want)


def wanted_words(want):
    """The wanted limit in the report's words: 'unlimited', or 'at least <n> KiB' (a larger limit is right)."""
    return str(want) if want in (None, _limits_conf.UNLIMITED) else 'at least {0} KiB'.format(want)


def service_name(name):
    """A service as the role writes its drop-in directory and asks systemctl about it (without .service)."""
    return re.sub(r'\.service$', '', str(name))


def limits_content(domains, want):
    """The whole PAM limits drop-in: one '-' (soft and hard) memlock line per domain."""
    lines = [_plan.managed_line(ROLE)]
    lines.extend('{0}\t-\tmemlock\t{1}'.format(domain, want) for domain in domains)
    return '\n'.join(lines) + '\n'


def manager_content(want):
    return '{0}\n[Manager]\nDefaultLimitMEMLOCK={1}\n'.format(_plan.managed_line(ROLE), systemd_value(want))


def service_content(want):
    return '{0}\n[Service]\nLimitMEMLOCK={1}\n'.format(_plan.managed_line(ROLE), systemd_value(want))


def service_dir(service):
    return '{0}/{1}.service.d'.format(UNIT_DIR, service)


def _unique(values):
    out = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def check_settings(settings, plan=None):
    """The settings the plan works with ({'want', 'domains', 'services', 'users', 'file'}), with a problem in
    ``plan`` for every value that cannot be used."""
    plan = plan if plan is not None else _plan.new_plan(ROLE)
    out = {'want': None, 'domains': [], 'services': [], 'users': [], 'file': None, 'submit': None}
    value = settings['nodeprep_memlock_value']
    try:
        out['want'] = wanted_value(value)
    except ValueError:
        _plan.add_problem(plan, 'nodeprep_memlock_value', value, VALUE_ALLOWED)
    domains = settings['nodeprep_memlock_domains'] or []
    bad = [d for d in domains if not DOMAIN_RE.match(str(d))]
    if bad:
        _plan.add_problem(plan, 'nodeprep_memlock_domains', domains, '{0} {1} not a domain ({2})'.format(
            ', '.join(_plan.show(d) for d in bad), 'is' if len(bad) == 1 else 'are', DOMAINS_ALLOWED))
    elif not domains and settings['nodeprep_memlock_limits']:
        _plan.add_problem(plan, 'nodeprep_memlock_domains', domains, 'at least one domain ({0}); set '
                          'nodeprep_memlock_limits: false to leave the PAM limits alone'.format(DOMAINS_ALLOWED))
    else:
        out['domains'] = _unique(domains)
    services = settings['nodeprep_memlock_services'] or []
    bad = [s for s in services if not SERVICE_RE.match(str(s)) or not service_name(s)]
    if bad:
        _plan.add_problem(plan, 'nodeprep_memlock_services', services, '{0} {1} not a service name ({2})'.format(
            ', '.join(_plan.show(s) for s in bad), 'is' if len(bad) == 1 else 'are', SERVICES_ALLOWED))
    else:
        out['services'] = _unique(service_name(s) for s in services)
    users = settings['nodeprep_memlock_verify_users'] or []
    bad = [u for u in users if not USER_RE.match(str(u))]
    if bad:
        _plan.add_problem(plan, 'nodeprep_memlock_verify_users', users, '{0} {1} not a user name ({2})'.format(
            ', '.join(_plan.show(u) for u in bad), 'is' if len(bad) == 1 else 'are', USERS_ALLOWED))
    else:
        out['users'] = _unique(users)
    path = settings['nodeprep_memlock_limits_file']
    if isinstance(path, str) and PAM_READS.match(path):
        out['file'] = path
    else:
        _plan.add_problem(plan, 'nodeprep_memlock_limits_file', path, FILE_ALLOWED)
    submit = settings['nodeprep_memlock_slurm_submit_limit']
    try:
        out['submit'] = None if submit is None else wanted_value(submit)
    except ValueError:
        _plan.add_problem(plan, 'nodeprep_memlock_slurm_submit_limit', submit, SUBMIT_ALLOWED)
    return out


def _managed_paths(settings, checked):
    """[(path, state, content, check, part, service)] of what the role writes."""
    want = checked['want']
    paths = []
    if settings['nodeprep_memlock_limits']:
        paths.append((checked['file'], 'file', limits_content(checked['domains'], want), USERS, 'limits', None))
    if settings['nodeprep_memlock_systemd_default']:
        paths.append((SYSTEM_CONF_DIR, 'directory', None, SERVICES, 'systemd', None))
        paths.append((MANAGER_DROPIN, 'file', manager_content(want), SERVICES, 'systemd', None))
    for service in checked['services']:
        paths.append((service_dir(service), 'directory', None, SERVICES, 'service', service))
        paths.append((service_dir(service) + '/' + DROPIN_NAME, 'file', service_content(want), SERVICES, 'service',
                      service))
    return paths


def gather(settings):
    """The limits subset for the verified users and the chosen services, and the files the role writes."""
    request = _plan.new_gather()
    checked = check_settings(settings)
    users = checked['users'] if settings['nodeprep_memlock_limits'] else []
    if settings['nodeprep_memlock_limits'] or settings['nodeprep_memlock_systemd_default'] or checked['services'] \
            or settings['nodeprep_memlock_slurm_jobs']:
        request['subsets'] = ['limits']  # where slurmd runs, the limits subset reads it too
    request['limits_users'] = list(users)
    request['limits_services'] = list(checked['services'])
    if checked['want'] is not None and (checked['file'] or not settings['nodeprep_memlock_limits']):
        request['files'] = [entry[0] for entry in _managed_paths(settings, checked)]
    return request


def _show_limit(value):
    return 'unset' if value is None else str(value)


def _pair(items):
    item = items.get('memlock') if isinstance(items, dict) else None
    if isinstance(item, dict):
        return item.get('soft'), item.get('hard')
    return None, None


def _where_file(where):
    """The file of a pam_limits source ('<path>:<line>'), or None for the built-in and kernel starting values."""
    if not where or ':' not in str(where):
        return None
    path, line = str(where).rsplit(':', 1)
    return path if line.isdigit() else None


def _errors(limits):
    """(PAM errors, systemd errors) of the limits facts: files that could not be read."""
    everything = [str(e) for e in limits.get('errors') or []]
    systemd = [str(e) for e in (limits.get('systemd') or {}).get('errors') or []]
    return [e for e in everything if e not in systemd], systemd


def _who(user):
    return 'any other user (*)' if user == ANY_USER else 'user {0}'.format(user)


def _users(plan, limits, checked, verified):
    """Drift of memlock.users from the effective limits, once the role's own file is right."""
    want = checked['want']
    effective = limits.get('effective') if isinstance(limits.get('effective'), dict) else {}
    sources = limits.get('sources') if isinstance(limits.get('sources'), dict) else {}
    no_limits = limits.get('no_limits') if isinstance(limits.get('no_limits'), dict) else {}
    seen = []
    for user in checked['users']:
        if user not in effective:
            _plan.add_drift(plan, USERS, '{0}: not reported by the limits facts'.format(_who(user)), fixable=False)
            continue
        soft, hard = _pair(effective[user])
        seen.append('{0} {1}/{2}'.format(user, _show_limit(soft), _show_limit(hard)))
        if not verified:
            continue
        if no_limits.get(user):
            _plan.add_drift(plan, USERS, '{0}: pam_limits sets no limit at all for it ({1}); the role does not '
                            'edit files it does not own: remove that line'.format(_who(user), no_limits[user]),
                            fixable=False)
            continue
        if _memlock.covers(soft, want) and _memlock.covers(hard, want):
            continue
        where = (sources.get(user) or {}).get('memlock') or {}
        winners = _unique(w for w, v in ((where.get('soft'), soft), (where.get('hard'), hard))
                          if not _memlock.covers(v, want) and w)
        files = _unique(_where_file(w) for w in winners if _where_file(w))
        foreign = [f for f in files if f != checked['file']]
        text = '{0}: memlock soft {1}, hard {2}, below {3}'.format(
            _who(user), _show_limit(soft), _show_limit(hard), want)
        if foreign:
            text += (': {0} wins over {1} (pam_limits applies a later file or a more specific domain last); the role '
                     'does not edit files it does not own: change or remove that line').format(
                         ', '.join(winners), checked['file'])
        else:
            text += ' (from {0}): no line of {1} applies to this user (nodeprep_memlock_domains: {2})'.format(
                ', '.join(winners) or 'no source', checked['file'], ', '.join(checked['domains']))
        _plan.add_drift(plan, USERS, text, fixable=False)
    return seen


def _services(plan, systemd, checked, settings, verified):
    """Drift of memlock.services from the effective systemd limits, once the role's drop-ins are right."""
    want = checked['want']
    seen = []
    reason = systemd.get('reason')
    if settings['nodeprep_memlock_systemd_default']:
        default = systemd.get('default') if isinstance(systemd.get('default'), dict) else {}
        soft, hard = _pair(default)
        source = (systemd.get('default_source') or {}).get('memlock')
        seen.append('default {0}/{1}'.format(_show_limit(soft), _show_limit(hard)))
        if soft is None and hard is None and reason:
            _plan.add_drift(plan, SERVICES, 'systemd was not asked: {0}'.format(reason), fixable=False, level='warn')
        elif verified['systemd'] and not (_memlock.covers(soft, want) and _memlock.covers(hard, want)):
            text = 'systemd DefaultLimitMEMLOCK soft {0}, hard {1}, below {2}'.format(
                _show_limit(soft), _show_limit(hard), want)
            source_file = _where_file(source)
            if source_file and source_file != MANAGER_DROPIN:
                text += (': {0} wins over {1} (a later system.conf.d drop-in); the role does not edit files it does '
                         'not own: change or remove that line').format(source, MANAGER_DROPIN)
            else:
                text += ' (from {0}) although {1} is in place: run systemctl daemon-reexec'.format(
                    source or 'no source', MANAGER_DROPIN)
            _plan.add_drift(plan, SERVICES, text, fixable=False)
    services = systemd.get('services') if isinstance(systemd.get('services'), dict) else {}
    service_errors = systemd.get('service_errors') if isinstance(systemd.get('service_errors'), dict) else {}
    for service in checked['services']:
        items = services.get(service)
        if not isinstance(items, dict):
            why = service_errors.get(service) or reason
            seen.append('{0} not reported'.format(service))
            _plan.add_drift(plan, SERVICES, '{0}: not reported{1}; its drop-in is {2}'.format(
                service, ' ({0})'.format(why) if why else '', 'in place' if verified.get(service) else 'still to write'),
                fixable=False, level='warn')
            continue
        soft, hard = _pair(items)
        seen.append('{0} {1}/{2}'.format(service, _show_limit(soft), _show_limit(hard)))
        if verified.get(service) and not (_memlock.covers(soft, want) and _memlock.covers(hard, want)):
            _plan.add_drift(plan, SERVICES, '{0}: LimitMEMLOCK soft {1}, hard {2}, below {3} although {4} is in '
                            'place: a later drop-in of the unit wins, or the unit was not reloaded (systemctl cat '
                            '{0}.service; systemctl daemon-reload); the role does not edit files it does not '
                            'own'.format(service, _show_limit(soft), _show_limit(hard), want,
                                         service_dir(service) + '/' + DROPIN_NAME), fixable=False)
    return seen


def _setting(config):
    """The propagation setting as slurm.conf holds it (the one Slurm reads)."""
    config = config if isinstance(config, dict) else {}
    value = config.get('PropagateResourceLimitsExcept')
    if value not in (None, '', '(null)'):
        return 'PropagateResourceLimitsExcept={0}'.format(value)
    return 'PropagateResourceLimits={0}'.format(config.get('PropagateResourceLimits') or 'ALL')


def _slurm_jobs(plan, slurm, checked):
    """Drift of memlock.services from what a Slurm job gets on this node (_memlock.slurm_job_limit): slurmd's own
    limit and, when Slurm propagates MEMLOCK, the submitting shell's (nodeprep_memlock_slurm_submit_limit)."""
    want = checked['want']
    broken = [s['error'] for s in slurm.get('slurmd') or [] if s.get('error')] + (
        [slurm['error']] if slurm.get('error') else [])
    if broken or slurm.get('memlock_propagated') is None:
        _plan.add_drift(plan, SERVICES, 'Slurm jobs: the memlock they get cannot be known: {0}'.format(
            '; '.join(broken) or 'scontrol show config was not read'), fixable=False)
        return ['slurm jobs unknown']
    seen = []
    for proc in slurm.get('slurmd') or []:
        s_soft, s_hard = _pair(proc)
        soft, hard = _memlock.slurm_job_limit({'soft': s_soft, 'hard': s_hard}, slurm['memlock_propagated'],
                                              checked['submit'])
        shown = 'the submitting shell\'s' if soft is None else _show_limit(soft)
        seen.append('slurm jobs {0}/{1}'.format(shown, _show_limit(hard)))
        if _memlock.covers(soft, want) and _memlock.covers(hard, want):
            continue
        slurmd = 'slurmd (pid {0}) runs with memlock soft {1}, hard {2}'.format(
            proc.get('pid'), _show_limit(s_soft), _show_limit(s_hard))
        slurmd_ok = _memlock.covers(s_soft, want) and _memlock.covers(s_hard, want)
        if not slurm['memlock_propagated']:
            text = ('Slurm jobs get memlock soft {0}, hard {1}, below {2}: {3} and {4} gives jobs slurmd\'s limit, '
                    'not the submitting shell\'s: {5}'.format(
                        _show_limit(soft), _show_limit(hard), want, slurmd, _setting(slurm.get('config')), FIX_SLURMD))
            text += ('; or let Slurm propagate MEMLOCK from login nodes whose memlock is raised'
                     if _memlock.covers(s_hard, want) else
                     ' (propagating MEMLOCK cannot help: a job never gets more than slurmd\'s hard limit)')
        else:
            if soft is None:
                text = ('Slurm jobs get the memlock soft limit of the shell they were submitted from ({0} propagates '
                        'MEMLOCK), which this node cannot see (nodeprep_memlock_slurm_submit_limit is null), up to '
                        'slurmd\'s hard limit; {1}'.format(_setting(slurm.get('config')), slurmd))
            else:
                text = ('Slurm jobs get memlock soft {0}, hard {1}, below {2}: {3} propagates the submitting shell\'s '
                        'soft limit (nodeprep_memlock_slurm_submit_limit: {4}) up to slurmd\'s hard limit; {5}'.format(
                            _show_limit(soft), _show_limit(hard), want, _setting(slurm.get('config')),
                            checked['submit'], slurmd))
            text += ': ' + FIX_PROPAGATION
            if not slurmd_ok:
                text += '; slurmd\'s own limit is below {0} too: {1}'.format(want, FIX_SLURMD)
        _plan.add_drift(plan, SERVICES, text, fixable=False)
    return seen


def plan(facts, settings, context):
    """The memlock role's plan on one node (see the module docstring for the rule)."""
    facts = facts or {}
    out = _plan.new_plan(ROLE)
    checked = check_settings(settings, out)
    manage_users = bool(settings['nodeprep_memlock_limits'])
    manage_systemd = bool(settings['nodeprep_memlock_systemd_default']) or bool(checked['services'])
    users_words = 'memlock soft and hard {0} for {1}'.format(
        wanted_words(checked['want']), ', '.join(checked['users']) or 'no user')
    parts = (['systemd DefaultLimitMEMLOCK'] if settings['nodeprep_memlock_systemd_default'] else []) + [
        '{0} LimitMEMLOCK'.format(s) for s in checked['services']]
    services_words = '{0} for {1}'.format(wanted_words(checked['want']), ', '.join(parts) or 'no service')
    if out['problems']:
        return out
    if not manage_users:
        _plan.set_check(out, USERS, 'not managed (nodeprep_memlock_limits false)', skip='not managed '
                        '(nodeprep_memlock_limits false)')
    limits = facts.get('limits')
    slurm = limits.get('slurm') if isinstance(limits, dict) and settings['nodeprep_memlock_slurm_jobs'] else None
    if slurm is not None:
        services_words = '{0} for {1}'.format(wanted_words(checked['want']), ', '.join(parts + ['Slurm jobs']))
    if not manage_systemd and slurm is None:
        _plan.set_check(out, SERVICES, 'not managed (nodeprep_memlock_systemd_default false, no service)',
                        skip='not managed (nodeprep_memlock_systemd_default false, no service)')
    if not isinstance(limits, dict) or not (manage_users or manage_systemd or slurm is not None):
        return out  # nothing managed, or the facts to gather (plan_role says which)
    right = {}
    for path, state, content, check, part, service in _managed_paths(settings, checked):
        mode = FILE_MODE if state == 'file' else DIR_MODE
        entry = _plan.want_path(out, facts, path, state=state, content=content, mode=mode, check=check)
        entry['part'] = part
        entry['service'] = service
        key = service if part == 'service' else part
        right[key] = right.get(key, True) and entry['change'] is None
    pam_errors, systemd_errors = _errors(limits)
    if manage_users:
        for error in pam_errors:
            _plan.add_drift(out, USERS, 'limits facts: {0}; the effective limits cannot be known'.format(error),
                            fixable=False)
        seen = _users(out, limits, checked, right.get('limits', False))
        if checked['users']:
            _plan.set_check(out, USERS, users_words, ', '.join(seen))
        else:
            _plan.set_check(out, USERS, users_words, '', skip='nodeprep_memlock_verify_users is empty')
    if manage_systemd or slurm is not None:
        seen = []
        if manage_systemd:
            for error in systemd_errors:
                _plan.add_drift(out, SERVICES, 'limits facts: {0}; the effective limits cannot be known'.format(
                    error), fixable=False)
            systemd = limits.get('systemd') if isinstance(limits.get('systemd'), dict) else {}
            verified = dict((key, value) for key, value in right.items() if key != 'limits')
            verified.setdefault('systemd', False)
            seen = _services(out, systemd, checked, settings, verified)
        if slurm is not None:
            seen += _slurm_jobs(out, slurm, checked)
        _plan.set_check(out, SERVICES, services_words, ', '.join(seen))
    if settings['nodeprep_memlock_verify']:
        out['reports'].extend('not verified: ' + item['msg'] for item in out['drift']
                              if not item['fixable'] and item['level'] == 'fail')
    return out
