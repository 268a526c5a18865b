# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The kernel role's plan (see _plan.py): its settings, what it gathers, and every decision of the role.

From the kernel facts of the one gather (``kernel_state``: the running kernel, the one that boots next, the devel
trees, the installed kernel packages, the OS) and the typed settings, the plan decides which kernel must boot next
(the target), what to install (the ELRepo repository, the kernel packages, the devel/headers package of the target),
whether grubby must change the default and whether the node must reboot.  The role's tasks only read
``args['kernel']`` (its lists are what they loop over); where a step changes the facts (an installed kernel, a DKMS
build, a reboot), the role plans again from a new gather, saying what it did (``context['run']['kernel']``,
run_state).  The per-OS constants are OS_VARS below (the role has no per-OS vars files).  The readiness check
kernel.devel_matched is this plan's drift: every piece of the role's work is drift of it.

The reboot of both the kernel and the nvidia_driver role is decided here (reboot_allowed, reboot_plan) and done by
one task file, roles/kernel/tasks/reboot.yml.
Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _dkms
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver_ubuntu
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rdma
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._driver import ELREPO_KEYS, elrepo_keys
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._os_release import os_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._kernel import version_key

ROLE = 'kernel'
# The readiness check whose verdict is this plan (the devel/headers tree of the kernel that must boot next).
CHECK = 'kernel.devel_matched'
CHECKS = (CHECK,)

# The per-OS constants, by name, the most specific first (distribution_version, distribution_major_version,
# distribution, os_family, default).  `{distribution_version}` in a package name stands for that OS fact.
# image_packages: the packages whose installed releases are the kernels of each source (EL: `kernel` is a meta
# package on EL 8+ and may be absent on minimal images, `kernel-core` carries the image); devel_meta_packages: what
# is installed with a missing kernel so its devel tree has the same version (linux-generic and
# linux-generic-hwe-* already depend on their headers meta package).
OS_VARS = {
    'RedHat': {
        'family': 'el',
        'sources': ['distro', 'elrepo-lt', 'elrepo-ml'],
        'image_packages': {'distro': ['kernel', 'kernel-core'], 'elrepo-lt': ['kernel-lt', 'kernel-lt-core'],
                           'elrepo-ml': ['kernel-ml', 'kernel-ml-core']},
        'devel_meta_packages': {'distro': [], 'elrepo-lt': ['kernel-lt-devel'], 'elrepo-ml': ['kernel-ml-devel']},
    },
    'Debian': {
        'family': 'debian',
        'sources': ['distro'],
        'image_packages': {'distro': []},
        'devel_meta_packages': {'distro': []},
    },
    'Ubuntu': {
        'family': 'debian',
        'sources': ['distro', 'hwe'],
        'image_packages': {'distro': [], 'hwe': ['linux-generic-hwe-{distribution_version}']},
        'devel_meta_packages': {'distro': [], 'hwe': []},
    },
    'default': {
        'family': 'unsupported',
        'sources': [],
        'image_packages': {},
    },
}

# ELRepo's kernel repository when nodeprep_kernel_elrepo_url is empty.
ELREPO_URL = 'https://elrepo.org/linux/kernel/el{major}/{arch}/'
# The repository definition the role writes (/etc/yum.repos.d/<name>.repo), disabled like ELRepo's own
# elrepo-release package writes it; the role enables it for its own transactions only.
ELREPO_REPO_NAME = 'elrepo-kernel'
# ELRepo's kernel package per source, and the EL major versions ELRepo publishes it for (no kernel-lt for EL 10).
ELREPO_PACKAGES = {'elrepo-lt': 'kernel-lt', 'elrepo-ml': 'kernel-ml'}
ELREPO_MAJORS = {'elrepo-lt': ['8', '9'], 'elrepo-ml': ['8', '9', '10']}
# grubby sets the kernel that boots next on EL.
GRUBBY = '/usr/sbin/grubby'
# Stands for the release a check-mode run cannot know yet (the kernel package is not installed).
PLACEHOLDER = '(newest {0} to be installed)'

SETTINGS = {
    'nodeprep_kernel_source': {
        'type': 'str',
        'choices': ['distro', 'hwe', 'elrepo-lt', 'elrepo-ml'],
        'default': 'distro',
        'description': [
            'Where the kernel comes from.',
            ("V(distro) is the distribution's kernel (EL C(kernel), Ubuntu C(linux-generic), Debian "
             'C(linux-image-amd64)).'),
            "V(hwe) is Ubuntu's hardware enablement kernel (C(linux-generic-hwe-<release>)); Ubuntu only.",
            ("V(elrepo-lt) is ELRepo's long-term kernel C(kernel-lt); EL 8 and 9 only (ELRepo has no kernel-lt for "
             'EL 10, the role refuses it there).'),
            "V(elrepo-ml) is ELRepo's mainline kernel C(kernel-ml); EL 8, 9 and 10.",
        ],
    },
    'nodeprep_kernel_manage_devel': {
        'type': 'bool',
        'default': True,
        'description': [
            ('Install the devel/headers package of exactly the kernel that boots next (EL8 C(kernel-devel-uname-r = '
             '<release>), EL9/10 C(kernel-devel-matched-<release>), ELRepo C(kernel-lt-devel)/C(kernel-ml-devel) of '
             'that release, Debian/Ubuntu C(linux-headers-<release>)).'),
        ],
    },
    'nodeprep_kernel_set_default': {
        'type': 'bool',
        'default': True,
        'description': [
            'EL only. Make the chosen kernel the default boot entry (C(grubby --set-default)).',
            ('A distro kernel that already boots next is kept even when a newer distro kernel is installed; '
             'otherwise the newest installed kernel of the chosen source is chosen.'),
        ],
    },
    'nodeprep_kernel_elrepo_url': {
        'type': 'str',
        'default': '',
        'description': [
            ('Base URL of the ELRepo kernel repository (C(.../elrepo/kernel/el<major>/<arch>/)). Used by the elrepo '
             'sources.'),
            ("The role writes the repository C(elrepo-kernel) disabled (as ELRepo's own release package does) and "
             'enables it for its own transactions only.'),
            'Empty (the default) means C(https://elrepo.org/linux/kernel/el<major>/<arch>/).',
        ],
    },
    'nodeprep_kernel_elrepo_gpgcheck': {
        'type': 'bool',
        'default': True,
        'description': [
            'Check the signatures of ELRepo packages.',
        ],
    },
    'nodeprep_kernel_elrepo_gpgkey': {
        'type': 'list',
        'elements': 'str',
        'default': [],
        'description': [
            "URLs of ELRepo's signing keys.",
            ('Empty (the default) lists the keys ELRepo signs this EL release with - EL 8/9 its original key and its'
             " v2 key, EL 10 only the v2 key (EL 10's rpm rejects the original key, and dnf then aborts the "
             'transaction).'),
            "Given keys are used as given, except that ELRepo's original key file is dropped on EL 10.",
        ],
    },
    'nodeprep_kernel_iommu_passthrough': {
        'type': 'bool', 'default': False,
        'description': [
            'Put C(iommu=pt) on the kernel command line (IOMMU passthrough; GPUDirect P2P and RDMA on bare metal need '
            'the IOMMU off or in passthrough; readiness check C(kernel.iommu)).',
            'EL, C(grubby --update-kernel=ALL --args=iommu=pt) where a boot entry lacks it. Debian, Ubuntu, '
            'C(iommu=pt) added to C(GRUB_CMDLINE_LINUX) in C(/etc/default/grub), then C(update-grub).',
            'It takes effect at the next boot, the role reboots only when O(nodeprep_kernel_reboot_ok) allows it, and '
            'otherwise records the reboot request.']},
    'nodeprep_kernel_reboot_ok': {
        'type': 'bool',
        'default': None,
        'description': [
            'May the role reboot the node into the chosen kernel.',
            'Defaults to the collection-wide O(nodeprep_reboot_ok), which defaults to V(false).',
            ('The reboot uses C(nodeprep_boot_time_command) (default C(cat /proc/sys/kernel/random/boot_id)) to see '
             'that the node really restarted.'),
        ],
    },
    'nodeprep_reboot_ok': {
        'type': 'bool',
        'default': False,
        'description': [
            ('The collection-wide switch (the nvidia_driver role reads it too) that O(nodeprep_kernel_reboot_ok) '
             'follows when that is not set.'),
            ('Typed once like every variable of the role, so V(false) given as C(-e nodeprep_reboot_ok=false) is '
             'false.'),
        ],
    },
    'nodeprep_kernel_reboot_timeout': {
        'type': 'int',
        'default': 1800,
        'description': [
            'Seconds to wait for the node to come back after the reboot.',
        ],
    },
    'nodeprep_kernel_verify': {
        'type': 'bool',
        'default': True,
        'description': [
            ('Read the state back after the run and fail when the chosen kernel does not boot next (EL) or its devel'
             ' tree does not resolve. Skipped in check mode.'),
        ],
    },
}
# The collection-wide nodeprep_gpu_node: the role does nothing on a node that is not a GPU node (_gpu_node.py).
SETTINGS.update(_gpu_node.SETTINGS)

# Collection-wide variables among SETTINGS (not nodeprep_kernel_*; defaults/main.yml does not set them).
SHARED = ('nodeprep_reboot_ok', _gpu_node.NAME)


def os_vars_name(os_info):
    """The OS_VARS entry for this OS (most specific first), or 'default'."""
    candidates = ['{0}_{1}'.format(os_info.get('distribution'), os_info.get('distribution_version')),
                  '{0}_{1}'.format(os_info.get('distribution'), os_info.get('distribution_major_version')),
                  os_info.get('distribution'), os_info.get('os_family')]
    return next((name for name in candidates if name in OS_VARS), 'default')


def os_vars(os_info):
    """The per-OS constants for this OS, with the OS facts filled into the package names."""
    chosen = OS_VARS[os_vars_name(os_info)]
    values = dict((key, os_info.get(key, '')) for key in ('distribution_version', 'distribution_major_version'))
    out = {'family': chosen['family'], 'sources': list(chosen['sources'])}
    for key in ('image_packages', 'devel_meta_packages'):
        out[key] = dict((source, [name.format(**values) for name in names])
                        for source, names in (chosen.get(key) or {}).items())
    return out


def sources_here(chosen, major):
    """The sources this OS can use: its own, less the ELRepo ones ELRepo does not publish for this EL release."""
    return [source for source in chosen['sources']
            if source not in ELREPO_MAJORS or str(major) in ELREPO_MAJORS[source]]


def reboot_allowed(settings, role):
    """May ``role`` (kernel, nvidia_driver) reboot the node: its own ``nodeprep_<role>_reboot_ok``, else the
    collection-wide ``nodeprep_reboot_ok``.  The settings are typed once (``-e nodeprep_reboot_ok=false`` arrives as
    False), and only True allows: the one home of the reboot permission of both roles."""
    own = settings.get('nodeprep_{0}_reboot_ok'.format(role))
    return (settings.get('nodeprep_reboot_ok') if own is None else own) is True


def reboot_ok(settings):
    """May the kernel role reboot (reboot_allowed)."""
    return reboot_allowed(settings, ROLE)


def reboot_plan(settings, role, why, blocked=False, before=()):
    """The ``reboot`` of a plan, as roles/kernel/tasks/reboot.yml reads it for both roles: ``needed`` (``why`` is not
    empty), ``why`` (the reasons, recorded in ``nodeprep_reboot_reasons`` when the reboot is not allowed),
    ``allowed`` (reboot_allowed, and nothing ``blocked`` it), ``timeout`` (``nodeprep_<role>_reboot_timeout``) and
    ``before`` (the commands to run just before the reboot, ``{argv, removes}``: only where the tool exists; only
    when the reboot is needed and allowed)."""
    allowed = reboot_allowed(settings, role) and not blocked
    return {'needed': bool(why), 'why': list(why), 'allowed': allowed,
            'timeout': settings.get('nodeprep_{0}_reboot_timeout'.format(role)) or 1800,
            'before': [dict(command) for command in before] if allowed and why else []}


# The stages of a run of the role: its start, after the kernel was installed, after the NVIDIA DKMS build for it,
# after the reboot.
STAGES = ('start', 'installed', 'dkms', 'rebooted')


def run_state(run):
    """What this run of the role did so far, as its later stages hand it to node_plan (``run: {kernel: ...}``):
    ``stage`` (one of STAGES), ``booting`` (the release the reboot was for) and ``dkms`` (per build that ran: its argv,
    rc and last output lines).  ValueError names a stage that is not one of STAGES."""
    run = run if isinstance(run, dict) else {}
    stage = str(run.get('stage') or 'start')
    if stage not in STAGES:
        raise ValueError('run.stage={0!r}: allowed {1}'.format(stage, ', '.join(STAGES)))
    builds = []
    for build in run.get('dkms') or []:
        if not isinstance(build, dict) or build.get('rc') is None:
            continue
        lines = [str(line) for line in (build.get('stdout_lines') or []) + (build.get('stderr_lines') or []) if line]
        argv = build.get('argv') or build.get('cmd') or build.get('__nodeprep_kernel_dkms_argv') or []
        builds.append({'argv': [str(a) for a in argv], 'rc': int(build['rc']), 'tail': lines[-3:]})
    return {'stage': stage, 'booting': str(run.get('booting') or ''), 'dkms': builds}


def elrepo_gpgkeys(major, keys=None, base=''):
    """ELRepo's signing keys for an EL major version (EL 10: the v2 key only: its rpm rejects the original key, and
    dnf then aborts the transaction), optionally below another ``base`` URL.  With ``keys`` (URLs the user gave),
    those, less any ELRepo key file this release must not list.  ValueError for a release ELRepo does not serve."""
    major = str(major)
    if major not in ELREPO_KEYS:
        raise ValueError('EL major version {0!r} is not one ELRepo publishes for; allowed: {1}'.format(
            major, ', '.join(sorted(ELREPO_KEYS, key=int))))
    wanted = elrepo_keys(major)
    if keys:
        keys = keys if isinstance(keys, list) else [keys]
        names = [key.rsplit('/', 1)[-1] for key in wanted]
        known = [key.rsplit('/', 1)[-1] for release in ELREPO_KEYS.values() for key in release]
        return [key for key in keys if key.rsplit('/', 1)[-1] in names or key.rsplit('/', 1)[-1] not in known]
    if base:
        return [base.rstrip('/') + '/' + key.rsplit('/', 1)[1] for key in wanted]
    return wanted


def devel_package(family, source, release, arch):
    """The package that installs /lib/modules/<release>/build for exactly that release.  EL distro kernels: the
    kernel-devel-uname-r provide of the release (what kernel-devel-matched resolves to, but for exactly this
    release rather than the newest); ELRepo: <kernel>-devel of that version-release; Debian/Ubuntu:
    linux-headers-<release>."""
    if family == 'el' and source in ELREPO_PACKAGES:
        suffix = '.' + (arch or 'x86_64')
        bare = release[:-len(suffix)] if release.endswith(suffix) else release
        return '{0}-devel-{1}'.format(ELREPO_PACKAGES[source], bare)
    if family == 'el':
        return 'kernel-devel-uname-r = {0}'.format(release)
    return 'linux-headers-{0}'.format(release)


def installed_releases(packages, names):
    """The releases (uname -r) the packages ``names`` hold, oldest first (kernel_state.packages)."""
    found = []
    for name in names:
        for release in (packages or {}).get(name) or []:
            if release not in found:
                found.append(release)
    return sorted(found, key=version_key)


def boot_devel(facts):
    """The devel/headers package of the kernel that boots next, whatever its source (the nvidia_driver role builds its
    DKMS modules against it): ``{family, release, needed, package}``, the source told by the installed package that
    holds that release (ELRepo's kernel-lt or kernel-ml, else the distribution's); None where the OS or the kernel
    that boots next is not known."""
    state = facts.get('kernel_state') if isinstance(facts.get('kernel_state'), dict) else {}
    os_info = os_facts(facts)
    family = os_vars(os_info)['family'] if os_info.get('os_family') else 'unsupported'
    release = state.get('default') or state.get('running')
    if family == 'unsupported' or not release:
        return None
    source = 'distro'
    packages = state.get('packages') if isinstance(state.get('packages'), dict) else {}
    if family == 'el':
        for name in ('elrepo-ml', 'elrepo-lt'):
            if release in installed_releases(packages, OS_VARS['RedHat']['image_packages'][name]):
                source = name
                break
        else:
            if '.elrepo.' in release:
                source = 'elrepo-lt'
    return {'family': family, 'release': release, 'needed': not (state.get('devel') or {}).get(release),
            'package': devel_package(family, source, release, os_info.get('architecture'))}


def gather(settings):
    """The kernel subset (it carries the OS facts, kernel_state.os, and the installed kernel packages)."""
    request = _plan.new_gather()
    request['subsets'] = ['kernel']
    return request


def _refuse(out, msg, settings):
    """The role cannot run on this node with these settings: it fails there, and readiness says why."""
    out['errors'].append(msg)
    _plan.set_check(out, CHECK, 'devel/headers installed for the kernel that boots next')
    _plan.add_drift(out, CHECK, 'the kernel role cannot run here: ' + msg, fixable=False)
    out['reboot'] = reboot_plan(settings, ROLE, [])
    out['args']['kernel'] = None
    return out


def _devel_check(out, settings, state, target, pending, package, kernel_package):
    """Readiness kernel.devel_matched: the devel/headers tree of the kernel that must boot next."""
    if not settings['nodeprep_kernel_manage_devel']:
        _plan.set_check(out, CHECK, 'not managed (nodeprep_kernel_manage_devel is false)', '',
                        skip='nodeprep_kernel_manage_devel is false: the role leaves the devel/headers trees alone')
        return
    expected = 'devel/headers installed for the kernel that boots next, {0}'.format(target)
    if pending:
        _plan.set_check(out, CHECK, expected)
        _plan.add_drift(out, CHECK, 'devel: no kernel of the chosen source is installed yet ({0}), so neither is its '
                                    'devel/headers package'.format(kernel_package))
        return
    if (state.get('devel') or {}).get(target):
        _plan.set_check(out, CHECK, expected, 'devel/headers present for {0} (/lib/modules/{0}/build)'.format(target))
        return
    _plan.set_check(out, CHECK, expected)
    _plan.add_drift(out, CHECK, 'devel: /lib/modules/{0}/build does not resolve: {1} is not installed'.format(
        target, package))


def _work(out, msg, level='fail'):
    """A piece of the role's work that is not the devel tree's: a reason to run, and drift of kernel.devel_matched
    (the check of the kernel that must boot next) at ``level``, so that readiness fails (or warns) while it is due."""
    out['drift'].append({'check': CHECK, 'msg': msg, 'level': level, 'fixable': True})
    if msg not in out['reasons']:
        out['reasons'].append(msg)


def dkms_plan(state, family, running, target, pending, host):
    """Before the node may boot ``target`` (R24): the NVIDIA DKMS modules that work on the running kernel must be
    ``installed`` for it (_dkms.needed_for).  ``build``: the ``dkms install`` argv per missing module; ``failed``: the
    last lines of the make.log of each missing build that was tried for target; ``error``: the message that stops
    the node while one is missing (after the build, the role plans again); ``restore_default``: EL's boot loader
    default goes back to the running kernel (``fallback``, grubby) when it is not that already."""
    entries = state.get('dkms') or []
    if pending:
        # Check mode before the kernel is installed: the modules that must be built, for a release not known yet.
        needed = _dkms.installed_for(entries, running) or _dkms.registered(entries)
        missing = list(needed)
    else:
        needed, missing = _dkms.needed_for(entries, running, target)
    failed = {} if pending else _dkms.failed_builds(missing, state.get('dkms_logs'), target)
    default = state.get('default') or running
    restore = family == 'el' and default != running
    return {
        'needed': needed,
        'missing': missing,
        'build': [_dkms.build_argv(name, target) for name in missing],
        'failed': failed,
        'error': _dkms.build_error(host, target, running, missing, failed, family == 'el') if missing else '',
        'restore_default': restore,
        'fallback': running,
        'fallback_path': '/boot/vmlinuz-' + running,
    }


def modules_plan(state, family, running, target, pending, host):
    """Before the node may boot ``target`` (R25): Ubuntu's Canonical-signed NVIDIA modules for it, on a node that has
    Ubuntu's modules (_driver_ubuntu.kernel_modules, from the gather's package list and apt candidates).  ``install``
    (the packages the role installs first), ``transactions`` (the apt transactions the task loops over),
    ``unavailable`` (missing with no apt candidate: the reboot stops), ``error`` (its message)."""
    node = state.get('driver_node') if isinstance(state.get('driver_node'), dict) else {}
    if family != 'debian' or pending:
        found = _driver_ubuntu.kernel_modules({}, None, running, running)
    else:
        found = _driver_ubuntu.kernel_modules(node.get('packages'), node.get('apt_candidates'), running, target)
    found['transactions'] = [list(found['install'])] if found['install'] else []
    found['error'] = _driver_ubuntu.modules_error(host, target, running, found['unavailable']) \
        if found['unavailable'] else ''
    return found


def stop_reboot(state, family, running, target, host, modules):
    """What stops the node before it may boot ``target``, known before any work: the NVIDIA DKMS state cannot be
    read (_dkms.unknown_state: dkms lists no NVIDIA module although the node has one), Ubuntu's signed modules for
    it are in no apt list.  [] when the target is the running kernel."""
    if not target or target == running:
        return []
    node = state.get('driver_node') if isinstance(state.get('driver_node'), dict) else {}
    stop = []
    unknown = _dkms.unknown_state(state, node.get('packages'))
    if unknown:
        stop.append(_dkms.unknown_error(host, target, running, unknown, family == 'el'))
    if modules['error']:
        stop.append(modules['error'])
    return stop


def _elrepo_defined(state):
    """Whether the node defines the ELRepo kernel repository the role writes (None: the repositories were not read)."""
    node = state.get('driver_node') if isinstance(state.get('driver_node'), dict) else {}
    repos = node.get('repos')
    return None if not isinstance(repos, dict) else ELREPO_REPO_NAME in repos


def plan(facts, settings, context):
    """Every decision of the kernel role for the node.

    ``args['kernel']`` holds what the tasks read: ``family``, ``source``, ``target`` (the release that must boot next,
    or PLACEHOLDER's text while the source has no kernel installed: ``pending``), ``install`` (``{module, name,
    enablerepo}``: the packages to install, empty when the facts show them installed), ``elrepo`` (the repository
    definition, None for other sources), ``devel`` (``{family, release, needed, package}`` for the target),
    ``set_default`` (grubby must change the
    default), ``dkms`` (dkms_plan: the NVIDIA DKMS builds the target needs before the node may boot it), ``grubby``,
    ``reboot_ok``, ``iommu``; and the lists the tasks loop over: ``repositories``, ``installs``, ``default`` (the
    grubby argv), ``iommu_commands``, ``grub_lines``, ``restore`` (grubby back to the running kernel after a failed
    DKMS build), ``verify`` (what is still not as wanted after the run) and ``predict`` (the task names check mode
    reports as changed because they cannot run before an earlier step: installing from a repository that check mode
    did not define).  ``args['run']``: what the later stages hand back to node_plan."""
    out = _plan.new_plan(ROLE)
    state = facts.get('kernel_state') if isinstance(facts.get('kernel_state'), dict) else {}
    os_info = os_facts(facts)
    run = run_state((context.get('run') or {}).get(ROLE))
    check_mode = bool(context.get('check_mode'))
    allowed = reboot_ok(settings)
    source = settings['nodeprep_kernel_source']
    out['reboot'] = reboot_plan(settings, ROLE, [])
    if os_info.get('os_family') is None or os_info.get('distribution_major_version') is None:
        # Neither Ansible's facts nor the gather's /etc/os-release name the OS: the role runs setup, plans again.
        _plan.set_check(out, CHECK, 'devel/headers installed for the kernel that boots next',
                        skip='the OS of the node is not known (no supported /etc/os-release)')
        _work(out, 'kernel facts to gather: the OS (the role reads it with the setup module)')
        out['args']['kernel'] = None
        return out
    chosen = os_vars(os_info)
    family = chosen['family']
    major = os_info.get('distribution_major_version')
    where = '{0} {1}'.format(os_info.get('distribution'), os_info.get('distribution_version'))
    if family == 'unsupported':
        return _refuse(out, 'gpufleet.nodeprep.kernel supports EL 8/9/10, Ubuntu 22.04/24.04 and Debian 12; this host '
                            'runs {0} (os_family {1})'.format(where, os_info.get('os_family')), settings)
    here = sources_here(chosen, major)
    if family == 'el' and source in ELREPO_MAJORS and source not in here:
        note = ' (there is no kernel-lt for EL10, only kernel-ml)' if source == 'elrepo-lt' else ''
        return _refuse(out, 'nodeprep_kernel_source={0} is not available on EL{1}: ELRepo publishes {2} only for EL{3}'
                            '{4}. Allowed here: {5}.'.format(source, major, ELREPO_PACKAGES[source],
                                                             '/EL'.join(ELREPO_MAJORS[source]), note, ', '.join(here)),
                       settings)
    if source not in here:
        return _refuse(out, 'nodeprep_kernel_source={0} is not available on {1}; allowed here: {2} (hwe exists on '
                            'Ubuntu only, elrepo-lt and elrepo-ml on EL only).'.format(source, where, ', '.join(here)),
                       settings)

    running = state.get('running') or ''
    default = state.get('default') or None
    nxt = default or running
    if not nxt:
        return _refuse(out, 'the kernel facts name no running kernel', settings)
    manage_devel = bool(settings['nodeprep_kernel_manage_devel'])
    images = chosen['image_packages'].get(source) or []
    meta = (chosen['devel_meta_packages'].get(source) or []) if manage_devel else []
    packages = state.get('packages') if isinstance(state.get('packages'), dict) else None
    placeholder = PLACEHOLDER.format(images[0] if images else 'kernel')
    install = {'module': None, 'name': [], 'enablerepo': None}
    target = nxt
    if family == 'el' and not (source == 'distro' and '.elrepo.' not in nxt):
        # The kernels of the chosen source, from the package database: keep the one that boots next when it is one
        # of them, else take the newest; install the source's kernel when none is installed.
        if packages is None:
            return _refuse(out, 'the installed kernel packages could not be read (rpm -qa; see the warnings of the '
                                'gather), so the kernels of nodeprep_kernel_source={0} cannot be told'.format(source),
                           settings)
        releases = installed_releases(packages, images)
        if nxt in releases:
            target = nxt
        elif releases:
            target = releases[-1]
        else:
            target = placeholder
            install = {'module': 'dnf', 'name': ([ELREPO_PACKAGES[source]] if source in ELREPO_PACKAGES else ['kernel'])
                       + meta, 'enablerepo': ELREPO_REPO_NAME if source in ELREPO_PACKAGES else None}
    elif family == 'debian' and images + meta:
        if packages is None:
            return _refuse(out, 'the installed kernel packages could not be read (dpkg-query -W; see the warnings of '
                                'the gather), so whether {0} is installed cannot be told'.format(
                                    ', '.join(images + meta)),
                           settings)
        if [name for name in images + meta if not packages.get(name)]:
            # GRUB boots the newest installed kernel: which one that is, the gather after the installation says.
            install = {'module': 'apt', 'name': images + meta, 'enablerepo': None}
            target = placeholder
    pending = target == placeholder
    package = None if pending else devel_package(family, source, target, os_info.get('architecture'))
    devel_needed = manage_devel and not pending and not (state.get('devel') or {}).get(target)
    host = context.get('host') or 'this node'
    # What must be there before the node may boot the target (R24, R25): the NVIDIA DKMS builds, Ubuntu's signed
    # modules; and what stops the reboot outright: a DKMS state that cannot be read, modules the archive lacks.
    dkms = dkms_plan(state, family, running, target, pending, host)
    modules = modules_plan(state, family, running, target, pending, host)
    stop = stop_reboot(state, family, running, target, host, modules)
    # Right after the role installed a kernel, grubby makes it the default in both modes (check mode cannot tell
    # whether the new kernel's package made itself the default); never a kernel the node must not boot.
    set_default = family == 'el' and bool(settings['nodeprep_kernel_set_default']) and \
        (target != default or run['stage'] == 'installed') and not stop
    # The ELRepo repository is written to install from it (it is defined disabled, enabled for that transaction
    # only); a node that has the kernel of the source needs nothing of it.
    elrepo = None
    if family == 'el' and source in ELREPO_PACKAGES and install['enablerepo']:
        url = settings['nodeprep_kernel_elrepo_url'] or ELREPO_URL.format(
            major=major, arch=os_info.get('architecture') or 'x86_64')
        gpgcheck = bool(settings['nodeprep_kernel_elrepo_gpgcheck'])
        elrepo = {'name': ELREPO_REPO_NAME, 'baseurl': url, 'gpgcheck': gpgcheck,
                  'description': 'ELRepo.org Community Enterprise Linux Kernel Repository - el{0}'.format(major),
                  'gpgkey': elrepo_gpgkeys(major, settings['nodeprep_kernel_elrepo_gpgkey']) if gpgcheck else None}

    # Why the role must run, in the order its tasks act; each is drift of kernel.devel_matched.
    if install['name']:
        _work(out, 'install: {0} ({1} has no kernel installed of nodeprep_kernel_source={2})'.format(
            ', '.join(install['name']), where, source) if family == 'el' else
            'install: {0} (not installed)'.format(', '.join(install['name'])))
    _devel_check(out, settings, state, target, pending, package, images[0] if images else 'kernel')
    if set_default:
        _work(out, 'kernel: {0} must boot next (the boot loader default is {1})'.format(target, default or 'unknown'),
              'warn')
    if dkms['missing']:
        _work(out, 'dkms: {0} not built for {1}; built before the node may boot it'.format(
            ', '.join(dkms['missing']), target))
    if modules['install']:
        _work(out, "modules: Ubuntu's signed {0} not installed for {1}; installed before the node may boot it".format(
            ', '.join(modules['install']), target))
    for msg in stop:
        _plan.add_drift(out, CHECK, msg, fixable=False)
    why = [] if target == running else [
        'kernel: running {0}, the kernel that boots next is {1}'.format(running, target)]
    if why:
        _work(out, 'reboot: running {0}, {1} boots next'.format(running, target), 'warn')
    iommu = _iommu_passthrough(out, settings, state, family, why)
    out['reboot'] = reboot_plan(settings, ROLE, why, blocked=bool(stop))
    if run['stage'] == 'dkms' and dkms['missing']:
        out['errors'].append(_dkms_error(dkms['error'], run['dkms']))
    if run['stage'] == 'dkms' and modules['install']:
        # The installation ran and did not bring them.
        out['errors'].append(_driver_ubuntu.modules_error(host, target, running, modules['install'], tried=True))
    if run['stage'] == 'rebooted' and run['booting'] and running != run['booting']:
        out['errors'].append('The node rebooted but runs {0}, not {1} (the boot loader\'s default is now {2}).'.format(
            running, run['booting'], default))
    predict_install = bool(check_mode and install['enablerepo'] and not _elrepo_defined(state))
    out['args']['kernel'] = {
        'family': family,
        'source': source,
        'sources': here,
        'target': target,
        'pending': pending,
        'install': install,
        'elrepo': elrepo,
        'devel': {'family': family, 'release': target, 'needed': devel_needed, 'package': package},
        'set_default': set_default,
        'dkms': dkms,
        'modules': modules,
        'stop': stop,
        'grubby': GRUBBY,
        'reboot_ok': allowed,
        'iommu': iommu,
        # The lists the tasks loop over.
        'repositories': [elrepo] if elrepo else [],
        'installs': [] if not install['name'] or predict_install else [install],
        'default': [['grubby', '--set-default=/boot/vmlinuz-' + target]] if set_default else [],
        'iommu_commands': [iommu['grubby']] if iommu and iommu.get('grubby') else [],
        'grub_lines': [iommu['grub_line']] if iommu and iommu.get('grub_line') else [],
        'restore': [['grubby', '--set-default=' + dkms['fallback_path']]]
        if family == 'el' and ((run['stage'] == 'dkms' and dkms['missing'] and dkms['restore_default']) or
                               (stop and (default != running or pending))) else [],
        'verify': [] if check_mode or not settings['nodeprep_kernel_verify'] else
        _verify(settings, state, family, target, pending, package),
        'predict': [INSTALL_TASK] if predict_install else [],
    }
    # What the later stages hand back (grubby after an installation is for the plan right after it only).
    out['args']['run'] = {'stage': 'start' if run['stage'] == 'installed' else run['stage'], 'booting': target}
    return out


# The name of the task of roles/kernel/tasks/work.yml that check mode predicts when it cannot run it (the ELRepo
# repository it would install from is not defined yet): the prediction counts as that task, as the real run does.
INSTALL_TASK = 'Install the kernel of the chosen source'


def _dkms_error(error, builds):
    """The message that stops the node after the NVIDIA DKMS build for the kernel it must boot failed: the plan's
    (make.log included), then what each failed ``dkms install`` said last."""
    parts = [error]
    for build in builds:
        if build['rc'] != 0:
            parts.append('{0} exited {1}: {2}'.format(' '.join(build['argv']), build['rc'], ' | '.join(build['tail'])))
    return ' '.join(parts)


def _verify(settings, state, family, target, pending, package):
    """What the role's last task fails on (nodeprep_kernel_verify): the chosen kernel does not boot next (EL), or its
    devel tree does not resolve.  Read from the facts of the last gather."""
    out = []
    if family == 'el' and settings['nodeprep_kernel_set_default'] and state.get('default') != target:
        out.append('The kernel that boots next is {0}, not the chosen {1} (nodeprep_kernel_source={2}).'.format(
            state.get('default'), target, settings['nodeprep_kernel_source']))
    if settings['nodeprep_kernel_manage_devel'] and (pending or not (state.get('devel') or {}).get(target)):
        out.append('/lib/modules/{0}/build does not resolve: the devel/headers package of {0} is missing ({1}).'.format(
            target, package))
    return out


def _iommu_passthrough(out, settings, state, family, why):
    """nodeprep_kernel_iommu_passthrough: iommu=pt in the boot loader config (_rdma.iommu_boot_plan), a reason to
    run while it is missing there, a reboot (added to ``why``) while the running kernel lacks it.  None when not
    asked.  Readiness judges the running state (kernel.iommu); the boot configuration is drift of
    kernel.devel_matched, the kernel that boots next."""
    if not settings.get('nodeprep_kernel_iommu_passthrough'):
        return None
    rdma = state.get('rdma') if isinstance(state.get('rdma'), dict) else {}
    decision = _rdma.iommu_boot_plan(family, rdma.get('cmdline'), rdma.get('boot_args'))
    if decision['error']:
        out['errors'].append(decision['error'])
        _plan.add_drift(out, CHECK, 'the kernel role cannot run here: ' + decision['error'], fixable=False)
        return decision
    for reason in decision['why']:
        _work(out, reason, 'warn')
    if decision['reboot']:
        reason = 'kernel: iommu=pt is not on the running kernel command line (/proc/cmdline)'
        why.append(reason)
        _work(out, reason, 'warn')
    return decision
