# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The nvidia_driver role's plan (see _plan.py): its settings, what it gathers, and every step of its work.

The decisions are _driver_plan.driver_plan (what to install, load, enable, reboot for) and _driver_plan.work_items
(whether any task would change something, and which readiness check that work is drift of), called with the settings
typed once: ``-e nodeprep_reboot_ok=false`` reaches them as False, never as the string "false" (which Python reads as
true).  The plan turns the driver plan into the lists the role's tasks loop over (``args``: the files, the
repositories, the packages, the commands, the units, in the order of the stages: prepare, repository, install,
load, extras, services, verify) and the one ``reboot`` roles/kernel/tasks/reboot.yml reads for both roles.  Its later
stages plan again through node_plan with what the run did (``context['run']['nvidia_driver']``,
_driver_plan.run_state); check mode names the tasks it cannot run before an earlier step (``args['predict']``).
Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._driver import (
    PERSISTENCED_DROPIN,
    PERSISTENCED_WANTS,
    IB_UMAD_CONF,
    RUNFILE_UNIT,
    RUNFILE_UNIT_TEXT,
    _file_is,
    _unit_is,
    driver_plan,
    fabric_package_names,
    run_state,
    wanted_match,
    work_items,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nvswitch_fabric import fabric_text
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._os_release import os_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans._plan_kernel import (
    boot_devel,
    reboot_allowed,
    reboot_plan,
)

ROLE = 'nvidia_driver'
# The readiness checks whose verdict is this plan: each passes exactly when the plan has no drift for it
# (_readiness.plan_check).  What no role decides stays in readiness: whether nvidia-smi answered (driver.loaded) and
# the GPUs' fabric state (fabric.manager).
CHECKS = ('driver.nouveau_blacklisted', 'driver.loaded', 'driver.open_modules', 'driver.persistenced',
          'fabric.manager')
FABRIC_UNIT = 'nvidia-fabricmanager'
PERSISTENCED_UNIT = 'nvidia-persistenced'

PREFIX = 'nodeprep_nvidia_driver_'
# The units the plan and the no-op decision look at besides the conflicting ones, and the files the role writes.
UNITS = ('nvidia-persistenced', 'nvidia-fabricmanager', 'nvidia-imex')
FILES = (PERSISTENCED_DROPIN.rsplit('/', 1)[0], PERSISTENCED_DROPIN, PERSISTENCED_WANTS, IB_UMAD_CONF)
# NVIDIA's runfile when nodeprep_nvidia_driver_runfile_url is empty.
RUNFILE_URL = 'https://us.download.nvidia.com/tesla/{version}/NVIDIA-Linux-{arch}-{version}.run'

SETTINGS = {
    'nodeprep_nvidia_driver_method': {
        'type': 'str',
        'choices': ['repo', 'runfile'],
        'default': 'repo',
        'description': [
            ("V(repo) installs NVIDIA's packages from its CUDA repository; V(runfile) runs NVIDIA's C(.run) "
             'installer with DKMS.'),
            ("The fabric manager, NVLSM and IMEX always come from NVIDIA's repository, so it is set up with "
             'V(runfile) too when they are needed.'),
        ],
    },
    'nodeprep_nvidia_driver_source': {
        'type': 'str',
        'choices': ['nvidia', 'ubuntu'],
        'default': 'nvidia',
        'description': [
            ("Whose driver packages - V(nvidia) installs NVIDIA's from its repository (built by DKMS); V(ubuntu) "
             "(Ubuntu only) installs Ubuntu's Canonical-signed driver from the node's own archive - "
             'C(nvidia-driver-<branch>-server-open) with C(linux-modules-nvidia-<branch>-server-open-<kernel>) for '
             'the kernel that boots next (prebuilt, loads under Secure Boot, no DKMS).'),
            ("With V(ubuntu) the fabric manager and NSCQ come from Ubuntu's archive too "
             '(C(nvidia-fabricmanager-<branch>), C(libnvidia-nscq-<branch>)); NVLSM and IMEX from NVIDIA\'s '
             'repository.'),
            ("A node that has the other flavour installed is refused, naming both (never swapped) - a node with "
             "Ubuntu's signed driver needs V(ubuntu), one with NVIDIA's packages V(nvidia)."),
        ],
    },
    'nodeprep_nvidia_driver_branch': {
        'type': 'str',
        'default': '580',
        'description': [
            ('Driver branch, three digits. R580 is the long-term branch; HGX B200 needs 570.133.20 or newer, Rubin '
             'GPUs branch 615 or later (refused below that when nvidia-smi reports a Rubin GPU; no Rubin PCI device '
             'ID is public, so a node without a loaded driver is not checked).'),
            ('EL 8/9 enable the module stream C(<branch>-open) (C(<branch>-dkms) for proprietary modules); EL 10 '
             'locks C(*nvidia*<branch>*) with the versionlock plugin; apt installs '
             'C(nvidia-driver-pinning-<branch>).'),
        ],
    },
    'nodeprep_nvidia_driver_version': {
        'type': 'str',
        'default': '',
        'description': [
            'Exact driver version (for example V(580.95.05)); must belong to O(nodeprep_nvidia_driver_branch).',
            'Empty installs the newest version of the branch. Required by the V(runfile) method.',
            'With apt the pinning package is C(nvidia-driver-pinning-<version>) then.',
        ],
    },
    'nodeprep_nvidia_driver_module_type': {
        'type': 'str',
        'choices': ['open', 'proprietary'],
        'default': 'open',
        'description': [
            ("V(open) installs NVIDIA's open kernel modules (required on Blackwell and newer, recommended from "
             'Turing on, the only ones NVIDIA ships from branch 620 on).'),
            ('V(proprietary) installs the closed modules (C(cuda-drivers)); refused when a Blackwell or newer GPU is'
             ' present, and with O(nodeprep_nvidia_driver_branch) 620 or later.'),
        ],
    },
    'nodeprep_nvidia_driver_repo_url': {
        'type': 'str',
        'default': '',
        'description': [
            ("Base URL of NVIDIA's CUDA repository for this host (EL C(baseurl) of the C(cuda-rhel<major>) "
             'repository; apt the URL of the flat C(deb) line).'),
            ('Empty (the default) means C(https://developer.download.nvidia.com/compute/cuda/repos/<rhel8|rhel9|rhel'
             '10|ubuntu2204|ubuntu2404|debian12>/<x86_64|sbsa>/).'),
        ],
    },
    'nodeprep_nvidia_driver_repo_gpgcheck': {
        'type': 'bool',
        'default': True,
        'description': [
            "Check the signatures of the repository's packages (apt without it marks the source C(Trusted)).",
        ],
    },
    'nodeprep_nvidia_driver_repo_gpgkey': {
        'type': 'str',
        'default': '',
        'description': [
            ("URL of NVIDIA's repository signing key. Empty (the default) means the repository URL followed by the "
             "key NVIDIA signs this OS's repository with - C(D42D0685.pub) (rhel8, rhel9), C(CDF6BA43.pub) (rhel10),"
             ' C(3bf863cc.pub) (apt).'),
        ],
    },
    'nodeprep_nvidia_driver_package_set': {
        'type': 'str',
        'choices': ['full', 'compute'],
        'default': 'full',
        'description': [
            ("V(full) installs C(nvidia-open) (C(cuda-drivers) for proprietary modules), NVIDIA's default set, which"
             ' pulls the desktop stack too. Default, because it is the same on every supported OS.'),
            ("V(compute) installs NVIDIA's compute-only set for headless nodes - EL C(nvidia-driver-cuda) "
             'with C(kmod-nvidia-open-dkms) (C(kmod-nvidia-latest-dkms) for proprietary modules); Debian/Ubuntu '
             'C(libnvidia-compute) with C(nvidia-dkms-open) (C(nvidia-dkms) for proprietary modules), with the branch '
             'in the names below 590 (C(libnvidia-compute-580), C(nvidia-dkms-580-open)), plus C(nvidia-utils) '
             '(C(nvidia-utils-580)) for nvidia-smi, which that set lacks.'),
            'A node that already runs the wanted driver is left with the set it has.',
        ],
    },
    'nodeprep_nvidia_driver_epel': {
        'type': 'str',
        'choices': ['auto', 'always', 'never'],
        'default': 'auto',
        'description': [
            ("EPEL, where EL's C(dkms) comes from (C(kmod-nvidia-open-dkms) requires it), written as the repository "
             'C(nodeprep-epel) with gpgcheck on, and CRB (EL 9/10) or PowerTools (EL 8) enabled beside it when the '
             'host defines it disabled.'),
            ('V(auto) when the driver is (to be) built with DKMS and no enabled C(epel) repository exists, '
             'V(always), or V(never) (dkms comes from elsewhere).'),
        ],
    },
    'nodeprep_nvidia_driver_epel_url': {
        'type': 'str',
        'default': '',
        'description': [
            ('EPEL C(baseurl). Empty means C(https://dl.fedoraproject.org/pub/epel/<release>/Everything/<arch>/), '
             'where C(<release>) is the major version on EL 8/9 and CentOS Stream 10, and C(10.<minor>) on RHEL 10.x '
             'and its rebuilds (EPEL 10 has one repository per minor release).'),
        ],
    },
    'nodeprep_nvidia_driver_epel_gpgkey': {
        'type': 'str',
        'default': '',
        'description': [
            ('EPEL signing key URL. Empty means C(https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-<major>), '
             'or C(<nodeprep_nvidia_driver_epel_url>RPM-GPG-KEY-EPEL-<major>) when a mirror URL is given.'),
        ],
    },
    'nodeprep_nvidia_driver_runfile_url': {
        'type': 'str',
        'default': '',
        'description': [
            ('Where to fetch the runfile (V(runfile) method). Default '
             'C(https://us.download.nvidia.com/tesla/<version>/NVIDIA-Linux-<arch>-<version>.run).'),
            'Empty (the default) means that URL.',
        ],
    },
    'nodeprep_nvidia_driver_runfile_checksum': {
        'type': 'str',
        'default': '',
        'description': [
            'Checksum of the runfile as C(<algorithm>:<hex>) (for example C(sha256:...)); empty checks none.',
        ],
    },
    'nodeprep_nvidia_driver_blacklist_nouveau': {
        'type': 'bool',
        'default': True,
        'description': [
            ("Write NVIDIA's nouveau blacklist (C(blacklist nouveau), C(options nouveau modeset=0)) when the facts "
             'show nouveau is not blacklisted yet.'),
        ],
    },
    'nodeprep_nvidia_driver_nouveau_conf': {
        'type': 'path',
        'default': '/etc/modprobe.d/blacklist-nouveau.conf',
        'description': [
            ("The modprobe file for the blacklist. The default is the name NVIDIA's driver installation guide uses "
             "for package installations; the runfile's own is "
             'C(/etc/modprobe.d/nvidia-installer-disable-nouveau.conf).'),
        ],
    },
    'nodeprep_nvidia_driver_persistenced': {
        'type': 'bool',
        'default': True,
        'description': [
            ("Keep C(nvidia-persistenced) enabled and running (NVIDIA's recommended replacement for C(nvidia-smi -pm"
             ' 1)).'),
        ],
    },
    'nodeprep_nvidia_driver_persistence_conflicts': {
        'type': 'str',
        'choices': ['disable', 'fail', 'ignore'],
        'default': 'disable',
        'description': [
            ('What to do with other units that manage persistence mode (listed in '
             'O(nodeprep_nvidia_driver_persistence_conflicting_units)) when they are enabled or running.'),
            'V(disable) stops and disables them, V(fail) stops the play naming them, V(ignore) leaves them.',
        ],
    },
    'nodeprep_nvidia_driver_persistence_conflicting_units': {
        'type': 'list',
        'elements': 'str',
        'default': ['nvidia-persistence-mode.service', 'nvidia-persistence.service', 'nvidia-pm.service',
                    'nvidia-smi-pm.service'],
        'description': [
            'Units known to set persistence mode on their own (usually with C(nvidia-smi -pm 1)).',
        ],
    },
    'nodeprep_nvidia_driver_fabricmanager': {
        'type': 'str',
        'choices': ['auto', 'always', 'never'],
        'default': 'auto',
        'description': [
            ('Fabric manager named for the branch (EL below 580 C(nvidia-fabric-manager), 580 and later '
             'C(nvidia-fabricmanager); apt below 580 C(nvidia-fabricmanager-<branch>), 580 and later '
             "C(nvidia-fabricmanager); service C(nvidia-fabricmanager)) at exactly the installed driver's version, "
             'locked there (exact versionlock / apt hold).'),
            ('V(auto) when kernel_facts finds NVSwitches - NVIDIA PCI bridges (Hopper) or NVLink 5 switch bridges '
             '(InfiniBand devices whose VPD holds C(SW_MNG), HGX B200 and newer) - V(always), or V(never).'),
        ],
    },
    'nodeprep_nvidia_driver_nvlsm': {
        'type': 'str',
        'choices': ['auto', 'always', 'never'],
        'default': 'auto',
        'description': [
            ('NVLink subnet manager package C(nvlsm) with the C(ib_umad) kernel module loaded now and at boot. No '
             "unit is written or enabled - on NVLink 5 the fabric manager's start script starts NVLSM itself."),
            'V(auto) on NVLink 5 systems (kernel_facts C(pci.nvswitch_fabric) is V(nvlink5)), V(always), or V(never).',
        ],
    },
    'nodeprep_nvidia_driver_nscq': {
        'type': 'bool',
        'default': True,
        'description': [
            ("With the fabric manager, also install the NVSwitch library at the driver's version, held there "
             '(NSCQ, C(libnvidia-nscq-<branch>) below 580, C(libnvidia-nscq) from 580; on NVLink 5 NVSDM instead, '
             'C(libnvsdm-<branch>) below 580, C(libnvsdm) from 580, x86_64 only).'),
        ],
    },
    'nodeprep_nvidia_driver_imex': {
        'type': 'bool',
        'default': False,
        'description': [
            'Install, enable and start C(nvidia-imex) (needed for multi-node NVLink such as GB200 NVL72), at the '
            "driver's version.",
            'The C(gpufleet.nodeprep.imex) role writes its node list (C(nodeprep_imex_domain_group)) and makes the '
            'IMEX channel; without it the daemon runs with no peers.',
        ],
    },
    'nodeprep_nvidia_driver_open_required_device_ids': {
        'type': 'list',
        'elements': 'str',
        'default': [],
        'description': [
            ('Extra PCI device IDs (for example V(0x2901)) that need the open kernel modules, for GPUs newer than '
             "the role's built-in Blackwell ranges."),
        ],
    },
    'nodeprep_nvidia_driver_manage_kernel_devel': {
        'type': 'bool',
        'default': True,
        'description': [
            ('When the facts show that the devel/headers tree of the kernel that boots next is missing, install it '
             "with the kernel role's task (same exact matching as the C(gpufleet.nodeprep.kernel) role)."),
        ],
    },
    'nodeprep_nvidia_driver_reboot_ok': {
        'type': 'bool',
        'default': None,
        'description': [
            ('May the role reboot the node (nouveau loaded, or the loaded NVIDIA module differs from the installed '
             'one).'),
            'Defaults to the collection-wide O(nodeprep_reboot_ok), which defaults to V(false).',
        ],
    },
    'nodeprep_reboot_ok': {
        'type': 'bool',
        'default': False,
        'description': [
            ('The collection-wide switch (the kernel role reads it too) that O(nodeprep_nvidia_driver_reboot_ok) '
             'follows when that is not set.'),
            ('Typed once like every variable of the role, so V(false) given as C(-e nodeprep_reboot_ok=false) is '
             'false.'),
        ],
    },
    'nodeprep_nvidia_driver_reboot_timeout': {
        'type': 'int',
        'default': 1800,
        'description': [
            'Seconds to wait for the node to come back after the reboot.',
        ],
    },
    'nodeprep_nvidia_driver_verify': {
        'type': 'bool',
        'default': True,
        'description': [
            ('Fail unless nvidia-smi lists as many GPUs as the PCI bus shows (and C(nodeprep_expected_gpus) when it '
             'is set and not 0), with the wanted driver and module type loaded. Skipped while a reboot is pending, '
             'and in check mode unless the driver was already right.'),
        ],
    },
    'nodeprep_expected_gpus': {
        'type': 'int',
        'default': 0,
        'description': [
            ('The collection-wide number of GPUs each node must show (the readiness role reads it too); V(0) (the '
             'default) compares nvidia-smi with the PCI bus only.'),
        ],
    },
}
# The collection-wide nodeprep_gpu_node: the role does nothing on a node that is not a GPU node (_gpu_node.py).
SETTINGS.update(_gpu_node.SETTINGS)

# Collection-wide variables among SETTINGS (not nodeprep_nvidia_driver_*; defaults/main.yml does not set them).
SHARED = ('nodeprep_reboot_ok', 'nodeprep_expected_gpus', _gpu_node.NAME)

# The settings driver_plan reads, by their name there (nodeprep_nvidia_driver_<name>; reboot_ok is resolved).
PLAN_KEYS = ('method', 'source', 'branch', 'version', 'module_type', 'package_set', 'fabricmanager', 'nvlsm', 'nscq',
             'imex', 'persistenced', 'persistence_conflicting_units', 'repo_url', 'repo_gpgcheck', 'repo_gpgkey', 'epel',
             'epel_url', 'epel_gpgkey', 'open_required_device_ids')


def reboot_ok(settings):
    """May the role reboot (_plan_kernel.reboot_allowed: nodeprep_nvidia_driver_reboot_ok, else nodeprep_reboot_ok)."""
    return reboot_allowed(settings, ROLE)


def plan_settings(settings):
    """The typed settings as driver_plan takes them (names without the prefix)."""
    out = dict((key, settings[PREFIX + key]) for key in PLAN_KEYS)
    out['reboot_ok'] = reboot_ok(settings)
    return out


def work_settings(settings):
    """The settings work_items reads besides the plan's."""
    return {'blacklist_nouveau': bool(settings[PREFIX + 'blacklist_nouveau']),
            'persistence_conflicts': settings[PREFIX + 'persistence_conflicts'],
            'expected_gpus': int(settings['nodeprep_expected_gpus'] or 0)}


def driver_facts(facts):
    """The facts driver_plan reads, from ansible_facts."""
    os_info = {'architecture': 'x86_64'}
    os_info.update(os_facts(facts))
    os_info['kernel'] = facts.get('kernel') or ''
    return {'os': os_info, 'kernel_state': facts.get('kernel_state') or {}, 'nvidia': facts.get('nvidia') or {},
            'services': facts.get('services') or {}, 'units': facts.get('nodeprep_units') or {}}


# Where the runfile is kept (/var/cache/nodeprep/NVIDIA-Linux-<arch>-<version>.run, _driver_plan.driver_plan).
RUNFILE_DIR = '/var/cache/nodeprep'


def gather(settings):
    """The kernel and NVIDIA subsets, the units the plan reads and the files the role writes (with the runfile
    method also the runfile and the unit written for it)."""
    request = _plan.new_gather()
    request['subsets'] = ['kernel', 'nvidia']
    request['units'] = list(UNITS) + [u for u in settings[PREFIX + 'persistence_conflicting_units'] or []
                                      if u not in UNITS]
    request['files'] = list(FILES)
    if settings[PREFIX + 'method'] == 'runfile' and settings[PREFIX + 'version']:
        request['files'] += [RUNFILE_UNIT, '{0}/NVIDIA-Linux-*-{1}.run'.format(RUNFILE_DIR, settings[PREFIX + 'version'])]
    return request


# The names of the tasks of roles/nvidia_driver/tasks/work.yml that check mode cannot run before an earlier step (a
# package from a repository check mode did not define, a unit of a package check mode did not install, a lock on
# packages check mode did not install): the plan predicts them, and the role reports each as changed under the
# task's own name (tasks/predict.yml), as the real run does.
INSTALL_TASK = 'Install the NVIDIA driver packages'
RUNFILE_TASK = 'Install the NVIDIA driver from the runfile'
EXTRAS_TASK = 'Install the persistence, fabric manager, nscq, NVLSM and IMEX packages'
HOLD_TASK = "Hold the fabric manager and nscq at the driver's version (apt)"
LOCK_TASK = 'Lock the NVIDIA packages at exactly the installed version'
SERVICES_TASK = "Enable and start the driver's services"
PREDICTED_TASKS = (INSTALL_TASK, RUNFILE_TASK, EXTRAS_TASK, HOLD_TASK, LOCK_TASK, SERVICES_TASK)
# NVIDIA's nouveau blacklist: the two lines its installer and its driver installation guide write.
NOUVEAU_TEXT = 'blacklist nouveau\noptions nouveau modeset=0\n'


# The refusals of the driver plan that are the node's condition, not settings: an unsupported platform, Ubuntu's signed
# modules missing from the archive for the kernel that boots next.
NODE_REFUSALS = ('platform', 'modules')


def _unknown_node(out, msg):
    """The role cannot plan the driver on this node: it fails there (the role changes nothing), and the checks fail
    with the reason."""
    out['errors'].append(msg)
    _not_judged(out, msg)
    return out


def plan(facts, settings, context):
    """Everything the nvidia_driver role does on the node: ``reasons`` (work_items of the driver plan, each also drift
    of the readiness check it belongs to), ``reboot`` (_plan_kernel.reboot_plan), ``files`` and the lists of ``args``
    the tasks loop over (see steps), made at the stage of the run ``context['run']['nvidia_driver']`` says."""
    out = _plan.new_plan(ROLE)
    run = run_state((context.get('run') or {}).get(ROLE))
    check_mode = bool(context.get('check_mode'))
    out['reboot'] = reboot_plan(settings, ROLE, [])
    out['args'] = {'runfile_url': None}
    errors = facts.get('nodeprep_errors') if isinstance(facts.get('nodeprep_errors'), dict) else {}
    if 'kernel' in errors:
        out['errors'].append('The kernel facts could not be read: {0}'.format(errors['kernel']))
        _not_judged(out, 'the kernel facts could not be read: {0}'.format(errors['kernel']))
        return out
    wanted = driver_facts(facts)
    out['args']['runfile_url'] = settings[PREFIX + 'runfile_url'] or RUNFILE_URL.format(
        version=settings[PREFIX + 'version'], arch=wanted['os'].get('architecture') or 'x86_64')
    node = wanted['kernel_state'].get('driver_node')
    if wanted['os'].get('os_family') is None:
        return _unknown_node(out, 'gpufleet.nodeprep.nvidia_driver supports EL 8/9/10, Ubuntu 22.04/24.04 and Debian 12; '
                                  'the /etc/os-release of this node names none of them (IDs rhel, rocky, almalinux, '
                                  'centos, ol, ubuntu, debian) and the play has no OS facts of Ansible')
    if not isinstance(node, dict):
        return _unknown_node(out, 'the driver packages of this node were not read (kernel_state.driver_node; the '
                                  'gather reads them on the OSes whose /etc/os-release it knows, see its warnings)')
    # The host's name for the refusals' messages (_driver_plan.refusals).
    wanted['host'] = context.get('host') or None
    driver = driver_plan(wanted, plan_settings(settings), node=node, stage=run['stage'], run=run,
                         check_mode=check_mode)
    units, files = facts.get('nodeprep_units'), facts.get('nodeprep_files')
    items = work_items(driver, wanted, work_settings(settings), units, files)
    # The cross-field rules argument_specs cannot express (_driver_plan.refusals): a platform the role does not
    # support is an error of the node, the others are settings that cannot be used here (each message names the
    # variable, the value and what is allowed).
    # Ubuntu's signed modules missing from the archive for the kernel that boots next is an error of the node too.
    for check, msg in sorted(driver.get('refused', {}).items()):
        (out['errors'] if check in NODE_REFUSALS else out['problems']).append(msg)
    if driver.get('refusals'):
        out['reasons'] = [msg for _check, _level, msg in items]
        for check in NODE_REFUSALS:
            if check in driver['refused']:
                _not_judged(out, driver['refused'][check])
        return out
    judge(out, driver, wanted, settings, units, files)
    for check, level, msg in items:
        # Every piece of work is drift of the check it belongs to: where the check's own words (judge) say nothing
        # of it, the work's words do.
        if not _plan.drift_for(out, check):
            _drift(out, check, msg, level)
        if msg not in out['reasons']:
            out['reasons'].append(msg)
    steps(out, driver, facts, settings, run, check_mode)
    if run['stage'] == 'rebooted' and (driver['reboot']['why'] or driver['blockers'] or
                                       not driver['loaded'].get('loaded')):
        out['errors'].append(
            'The node rebooted but the installed NVIDIA driver {0} is not loaded: {1} (NVIDIA module loaded={2} '
            'version={3}). The role does not reboot again.'.format(
                driver.get('installed_version') or '?', '; '.join(driver['blockers'] + driver['reboot']['why']),
                bool(driver['loaded'].get('loaded')), driver['loaded'].get('version') or 'none'))
    return out


def _entry(path, state, content=None, mode=None, src=None, change=None):
    return {'path': path, 'state': state, 'content': content, 'mode': mode, 'src': src, 'owner': 'root',
            'group': 'root', 'change': change}


def _files(driver, facts, settings, files, need_repo):
    """The files, directories and links of the role (the shape of _plan.want_path), ``change`` None where the facts
    show them right."""
    kernel_state = facts['kernel_state']
    out = []

    def add(path, state, content=None, mode=None, src=None, right=False, why=': missing or different'):
        out.append(_entry(path, state, content, mode, src, change=None if right else path + why))

    if settings[PREFIX + 'blacklist_nouveau']:
        # Written where no file blacklists nouveau yet (kernel_facts reads every modprobe.d file).
        out.append(_entry(settings[PREFIX + 'nouveau_conf'], 'file', NOUVEAU_TEXT, '0644', change=None if (
            kernel_state.get('nouveau') or {}).get('blacklisted') else 'nouveau: not blacklisted'))
    persist = driver['persistenced']
    if persist['enable'] and persist['runfile_unit']:
        add(RUNFILE_UNIT, 'file', RUNFILE_UNIT_TEXT, '0644', right=_file_is(files, RUNFILE_UNIT, RUNFILE_UNIT_TEXT))
    if persist['enable'] and persist['dropin']:
        folder = persist['dropin_path'].rsplit('/', 1)[0]
        add(folder, 'directory', mode='0755', right=_file_is(files, folder, mode='0755', kind='directory'),
            why=': missing')
        add(persist['dropin_path'], 'file', persist['dropin_content'], '0644',
            right=_file_is(files, persist['dropin_path'], persist['dropin_content']))
        add(persist['wants_link'], 'link', src=persist['unit_path'],
            right=_file_is(files, persist['wants_link'], kind='link', target=persist['unit_path']))
    fabric = driver['fabric']
    if fabric['ib_umad']:
        add(fabric['ib_umad_conf'], 'file', fabric['ib_umad_conf_content'], '0644',
            right=_file_is(files, fabric['ib_umad_conf'], fabric['ib_umad_conf_content']))
    repo = driver['repo']
    if driver['family'] == 'debian' and need_repo:
        node = kernel_state.get('driver_node') or {}
        out.append(_entry(repo['apt_sources'], 'file', repo['apt_content'], '0644', change=None if node.get(
            'apt_sources_content') == repo['apt_content'] else 'repository: missing or different'))
    if settings[PREFIX + 'method'] == 'runfile' and not driver['ok']:
        add(RUNFILE_DIR, 'directory', mode='0755', right=_file_is(files, RUNFILE_DIR, mode='0755', kind='directory'),
            why=': missing')
    return out


def steps(out, driver, facts, settings, run, check_mode):
    """The lists the role's tasks loop over, in the order of its stages (an empty list: the task changes nothing):

    prepare: ``files`` (the plan's), ``after_files`` (commands a written file needs: the initramfs without nouveau,
    ib_umad now), ``kernel_devel`` (the devel/headers package of the kernel that boots next, for the kernel role's
    devel task); repository: ``repositories`` (EL, yum_repository), ``crb``, ``fetch`` (get_url: NVIDIA's apt key,
    the runfile), ``apt_update``, ``streams`` (dnf module commands), ``unlock_move`` (versionlocks that would hold the
    node on the driver it leaves), ``unpin``; install: ``install`` (package transactions: apt's pinning package
    first), ``runfile_run``, ``dkms_build``;
    load: ``stop`` (what stops the role before a reboot), ``modprobe``; extras: ``unhold``, ``remove``, ``extras``,
    ``hold``, ``unlock``, ``lock`` (versionlock transactions: lists of entries); services: ``conflicts`` (to stop and disable), ``services`` (systemd_service
    arguments); verify: ``verify`` (what the last task fails on).  Besides: ``predict`` (``install``: before the
    re-plan after the installation, ``extras``: after it; the task names check mode reports as changed because it
    cannot run them), ``pending`` (check mode: what the settings roles
    predict from, nodeprep_nvidia_driver_pending), ``run`` (what the later stages hand back to node_plan), ``ok``,
    ``package_manager``."""
    args = out['args']
    gathered = facts
    facts = driver_facts(facts)
    fam = driver['family']
    ok = driver['ok']
    method = settings[PREFIX + 'method']
    start = run['stage'] == 'start'
    extras = driver['extras']
    repo = driver['repo']
    epel = driver['epel']
    lock = driver['versionlock']
    predict = driver['predict']
    # The repositories are written when the role installs from them.
    need_repo = repo['needed'] and (not ok or bool(extras['missing']))
    files = _files(driver, facts, settings, gathered.get('nodeprep_files'), need_repo)
    out['files'] = files
    changed = [f['path'] for f in files if f['change']]
    written = set(changed) | set(run['files'])
    nouveau = [f for f in files if f['path'] == settings[PREFIX + 'nouveau_conf'] and f['change']]
    after_files = []
    if nouveau:
        after_files.append({'argv': driver['initramfs']['argv'], 'removes': driver['initramfs']['tool']})
    if [f for f in files if f['path'] == driver['fabric']['ib_umad_conf'] and f['change']]:
        after_files.append({'argv': ['modprobe', 'ib_umad'], 'removes': '/usr/sbin/modprobe'})
    devel = boot_devel(gathered)
    predicted = {'install': [], 'extras': []}
    runfile = method == 'runfile' and not ok
    runfile_fetched = bool([path for path, state in (gathered.get('nodeprep_files') or {}).items()
                            if path == driver['runfile']['path'] and (state or {}).get('exists')])
    install = [{'name': list(driver['install']['packages'])}] if method == 'repo' and not ok else []
    if runfile:
        install = [{'name': list(driver['runfile']['packages'])}]
    if fam == 'debian' and method == 'repo' and not ok and driver['install']['pinning_package']:
        # apt: the branch's pinning package first, in its own transaction, so that the driver resolves within it.
        install.insert(0, {'name': [driver['install']['pinning_package']]})
    # The install stage runs before the first re-plan: its predictions are the start's.
    if check_mode and predict['packages'] and not runfile:
        predicted['install'] += [INSTALL_TASK] if install and start else []
        install = []
    runfile_run = [{'argv': driver['runfile']['argv'], 'removes': driver['runfile']['path']}] if runfile else []
    if check_mode and runfile and not runfile_fetched and start:
        predicted['install'].append(RUNFILE_TASK)
        runfile_run = []
    extras_names = list(extras['missing']) + (
        [lock['plugin_package']] if lock['use'] and not lock['plugin_present'] else [])
    hold = list(extras['hold'])
    if check_mode and predict['extras'] and (extras['needed'] or extras['remove']):
        predicted['extras'] += [EXTRAS_TASK] + ([HOLD_TASK] if hold else [])
        extras_names = [lock['plugin_package']] if lock['use'] and not lock['plugin_present'] else []
        hold = []
    lock_add = list(lock['add'])
    unlock = list(lock['remove']) if not (start and not ok) else []
    if check_mode and lock['use'] and (predict['versionlock'] or not lock['plugin_present']):
        if predict['versionlock'] or lock_add:
            predicted['extras'].append(LOCK_TASK)
        lock_add = []
        unlock = unlock if lock['plugin_present'] else []
    services = _services(driver, settings, written)
    if check_mode and [s for s in services if s['name'] in predict['units']]:
        predicted['extras'].append(SERVICES_TASK)
        services = []
    stop = list(driver['blockers'])
    if not extras['version_known'] and (extras['needed'] or extras['remove']) and not predicted['extras'] and \
            (ok or not start):
        stop.append('The fabric manager must match the driver version exactly, but no installed NVIDIA driver of the '
                    'wanted branch was found for {0} (installed: {1}; nvidia-smi: {2}).'.format(
                        driver['boot_kernel'], driver.get('installed_version') or 'none',
                        (facts.get('nvidia') or {}).get('error') or 'absent'))
    args.update({
        'ok': ok,
        'package_manager': 'dnf' if fam == 'el' else 'apt',
        'after_files': after_files,
        'kernel_devel': [devel] if devel and settings[PREFIX + 'manage_kernel_devel'] and not ok and devel['needed']
        else [],
        'repositories': _repositories(driver, need_repo),
        'crb': [{'path': epel['crb']['file'], 'section': epel['crb']['id']}]
        if fam == 'el' and need_repo and epel['needed'] and epel['crb']['enable'] else [],
        # NVIDIA's apt signing key, the runfile.
        'fetch': ([{'url': repo['gpgkey'], 'dest': repo['apt_keyring'], 'checksum': None, 'mode': '0644'}]
                  if fam == 'debian' and need_repo and repo['gpgcheck'] else []) +
        ([{'url': args['runfile_url'], 'dest': driver['runfile']['path'], 'mode': '0755',
           'checksum': settings[PREFIX + 'runfile_checksum'] or None}] if runfile else []),
        'apt_update': bool(fam == 'debian' and need_repo and repo['changes']),
        'streams': ([['dnf', '-y', 'module', 'reset', 'nvidia-driver']] if driver['stream']['reset'] else []) +
        ([['dnf', '-y', 'module', 'enable', 'nvidia-driver:' + driver['stream']['wanted']]]
         if driver['stream']['enable'] else []),
        'unlock_move': [list(lock['remove'])] if start and not ok and lock['remove'] else [],
        'unpin': [list(driver['install']['unpin'])] if not ok and driver['install']['unpin'] else [],
        'install': install,
        'runfile_run': runfile_run,
        'dkms_build': [['dkms', 'autoinstall', '-k', driver['boot_kernel']]] if driver['load']['dkms_build'] else [],
        'stop': stop,
        'modprobe': [['modprobe', 'nvidia']] if driver['load']['modprobe'] else [],
        'unhold': list(extras['unhold']),
        'remove': [{'name': list(extras['remove'])}] if extras['remove'] else [],
        'extras': [{'name': extras_names}] if extras_names else [],
        'hold': hold,
        'unlock': [unlock] if unlock else [],
        'lock': [lock_add] if lock_add else [],
        'conflicts': list(driver['persistence_conflicts'])
        if settings[PREFIX + 'persistence_conflicts'] == 'disable' else [],
        'services': services,
        'verify': _verify(driver, facts, settings, check_mode),
        'predict': predicted,
        # the rdma plan predicts DMA-BUF or nvidia_peermem from the flavour and branch the run installs
        'pending': {'persistenced': bool(settings[PREFIX + 'persistenced']), 'imex': bool(settings[PREFIX + 'imex']),
                    'flavour': settings[PREFIX + 'module_type'], 'branch': settings[PREFIX + 'branch']}
        if check_mode and (run['installing'] or driver['check_mode_loads']) else None,
        # What the later stages hand back to node_plan; at the start, what this run will have done before them.
        'run': dict(run, start_version=driver['installed_version'] if start else run['start_version'],
                    installing=run['installing'] or bool(predicted['install']),
                    files=sorted(written) if start else run['files'], initramfs=run['initramfs'] or bool(nouveau)),
    })
    # The reboot (roles/kernel/tasks/reboot.yml): nouveau still loaded although blacklisted means the initramfs of
    # the kernel that boots next may still carry it (an earlier run failed after writing the blacklist): rebuilt once
    # more just before the reboot, unless this run rebuilt it.
    before = [{'argv': driver['initramfs']['argv'], 'removes': driver['initramfs']['tool']}] \
        if driver['nouveau_loaded'] and not nouveau and not run['initramfs'] else []
    out['reboot'] = reboot_plan(settings, ROLE, driver['reboot']['why'], blocked=bool(driver['blockers']),
                                before=before)
    return out


def _repositories(driver, need_repo):
    """The yum_repository arguments of EPEL (when the role defines it) and NVIDIA's CUDA repository (EL)."""
    if driver['family'] != 'el' or not need_repo:
        return []
    out = []
    epel = driver['epel']
    if epel['needed'] and epel['define']:
        out.append({'name': epel['id'], 'description': epel['description'], 'baseurl': epel['url'], 'gpgcheck': True,
                    'gpgkey': epel['gpgkey']})
    repo = driver['repo']
    out.append({'name': repo['name'], 'description': repo['description'], 'baseurl': repo['url'],
                'gpgcheck': repo['gpgcheck'], 'gpgkey': repo['gpgkey'] if repo['gpgcheck'] else None})
    return out


def _services(driver, settings, written):
    """The systemd_service arguments of nvidia-persistenced, the fabric manager and IMEX: enabled, and started once
    the driver is loaded (at the next boot otherwise); nvidia-persistenced restarted when its drop-in was written in
    this run.  Ubuntu's packaged unit is static: the wants link starts it at boot, so it is only started."""
    can_start = driver['can_start']
    persist = driver['persistenced']
    out = []
    if persist['enable'] and (can_start or not persist['dropin']):
        reload_ = (persist['dropin'] and persist['dropin_path'] in written) or \
            (persist['runfile_unit'] and RUNFILE_UNIT in written)
        out.append({'name': PERSISTENCED_UNIT, 'enabled': None if persist['dropin'] else True,
                    'state': ('restarted' if persist['dropin'] and persist['dropin_path'] in written else 'started')
                    if can_start else None, 'daemon_reload': bool(reload_)})
    for name in driver['services']:
        out.append({'name': name, 'enabled': True, 'state': 'started' if can_start else None, 'daemon_reload': False})
    return out


def _verify(driver, facts, settings, check_mode):
    """What the role's last task fails on (nodeprep_nvidia_driver_verify): the wanted driver not loaded, or nvidia-smi
    not listing as many GPUs as the PCI bus shows (and nodeprep_expected_gpus).  Nothing while a reboot is pending
    (the driver cannot be loaded yet), and in check mode unless the driver was already right."""
    if not settings[PREFIX + 'verify'] or driver['reboot']['needed'] or (check_mode and not driver['ok']):
        return []
    nvidia = facts.get('nvidia') or {}
    gpus = len(nvidia.get('gpus') or [])
    pci = int(((facts.get('kernel_state') or {}).get('pci') or {}).get('gpu_count') or 0)
    expected = int(settings['nodeprep_expected_gpus'] or 0)
    if driver['ok'] and gpus == pci and (not expected or gpus == expected):
        return []
    return ['NVIDIA driver check failed: nvidia-smi {0}; the PCI bus shows {1} GPU(s){2}; wanted driver {3} with {4} '
            'modules, loaded: {5} {6}.'.format(
                'lists {0} GPU(s) with driver {1}'.format(gpus, nvidia.get('driver_version'))
                if nvidia.get('present') else 'does not work ({0})'.format(nvidia.get('error') or 'no NVIDIA facts'),
                pci, ', nodeprep_expected_gpus={0}'.format(expected) if expected else '',
                settings[PREFIX + 'version'] or 'branch ' + str(settings[PREFIX + 'branch']),
                settings[PREFIX + 'module_type'], driver['loaded'].get('version') or 'none',
                driver['loaded'].get('flavour') or '').strip()]


# ----------------------------------------------------------------------------------------------------- readiness

def _not_judged(out, why):
    """Drift for every check of the role when the plan could not be made: the checks fail with the reason."""
    for check in CHECKS:
        _plan.add_drift(out, check, why, fixable=False)


def _drift(out, check, msg, level='fail'):
    # The readiness wording of a check; the role's reasons are work_items' (each also drift of its check, plan()).
    out['drift'].append({'check': check, 'msg': msg, 'level': level, 'fixable': True})


def unit_text(units, name):
    """A unit as readiness reports it: ``name: active state, unit file state``, or not installed."""
    unit = (units or {}).get(name + '.service') or {}
    if not unit or unit.get('load') in (None, 'not-found'):
        return '{0}: not installed'.format(name)
    return '{0}: {1}, {2}'.format(name, unit.get('active'), unit.get('enabled'))


def _has_gpus(facts):
    pci_count = ((facts.get('kernel_state') or {}).get('pci') or {}).get('gpu_count')
    return not (pci_count == 0 and not (facts.get('nvidia') or {}).get('gpus'))


def _gpu_label(gpu):
    where = gpu.get('pci_bus_id') or gpu.get('uuid')
    return 'GPU {0} ({1})'.format(gpu.get('index'), where) if where else 'GPU {0}'.format(gpu.get('index'))


def judge(out, start, facts, settings, units, files):
    """The readiness checks of the role (CHECKS) from the driver plan of the start: their words (``checks``) and
    the drift that fails or warns them.  Every rule is the plan's: the open-only GPUs (start['open_required_reasons']),
    the branch match (wanted_match), the fabric detection and the fabric manager switch (start['fabric']), the
    persistence daemon's unit rule (_unit_is, as work_items reads it)."""
    _nouveau(out, facts, settings)
    _loaded(out, start, facts, settings)
    _open_modules(out, start, facts, settings)
    _persistenced(out, start, facts, settings, units, files)
    _fabric(out, start, facts, settings, units)


def _nouveau(out, facts, settings):
    check = 'driver.nouveau_blacklisted'
    if not settings[PREFIX + 'blacklist_nouveau']:
        _plan.set_check(out, check, 'not managed ({0}blacklist_nouveau false)'.format(PREFIX), skip='not checked')
        return
    expected = 'nouveau blacklisted and not loaded'
    nouveau = (facts.get('kernel_state') or {}).get('nouveau')
    if not isinstance(nouveau, dict):
        _plan.set_check(out, check, expected, skip='kernel facts were not gathered')
        return
    if nouveau.get('loaded'):
        _drift(out, check, 'nouveau is loaded (reboot after blacklisting)')
    if not nouveau.get('blacklisted'):
        _drift(out, check, 'nouveau is not blacklisted')
    files_text = ', '.join(nouveau.get('blacklist_files') or []) or 'blacklist file'
    _plan.set_check(out, check, expected, '' if _plan.drift_for(out, check) else
                    'blacklisted in {0}, not loaded'.format(files_text))


def _loaded(out, start, facts, settings):
    check = 'driver.loaded'
    branch = str(settings[PREFIX + 'branch'] or '').strip()
    version = str(settings[PREFIX + 'version'] or '').strip()
    if version:
        expected = 'driver {0} loaded and answering'.format(version)
    elif branch:
        expected = 'a driver of branch {0} loaded and answering'.format(branch)
    else:
        expected = 'an NVIDIA driver loaded and answering'
    if not _has_gpus(facts):
        _plan.set_check(out, check, expected, skip='no NVIDIA GPU on the PCI bus')
        return
    module = (facts.get('kernel_state') or {}).get('nvidia_module') or {}
    loaded = (facts.get('nvidia') or {}).get('driver_version')
    if module and not module.get('loaded'):
        _drift(out, check, 'the nvidia kernel module is not loaded')
    if loaded:
        if not wanted_match(loaded, branch, version):
            _drift(out, check, 'driver {0} is loaded, {1} wanted'.format(
                loaded, version if version else 'branch {0}'.format(branch)))
        if module.get('version') and module['version'] != loaded:
            _drift(out, check, 'kernel module {0} differs from user-space driver {1} (reboot or reload)'.format(
                module['version'], loaded))
    installed = start.get('installed_version')
    if loaded and module.get('loaded') and module.get('version') == loaded and wanted_match(loaded, branch, version) \
            and module.get('flavour') == settings[PREFIX + 'module_type'] and \
            start['boot_kernel'] != start['running_kernel'] and not start['ok']:
        _drift(out, check, 'driver {0} is not built for the kernel that boots next, {1} (a reboot would bring the node '
                           'up without its GPUs; the role builds it)'.format(loaded, start['boot_kernel']), level='warn')
    if module.get('loaded') and module.get('version') and installed and module['version'] != installed and \
            installed != loaded and wanted_match(installed, branch, version):
        _drift(out, check, 'driver {0} is installed ({1}), the loaded module is {2} (reboot to load it)'.format(
            installed, start.get('installed_source'), module['version']))
    _plan.set_check(out, check, expected, '' if _plan.drift_for(out, check) or not loaded else
                    'driver {0} loaded ({1} modules)'.format(loaded, module.get('flavour') or 'unknown'))


def _open_modules(out, start, facts, settings):
    check = 'driver.open_modules'
    module = (facts.get('kernel_state') or {}).get('nvidia_module') or {}
    flavour = module.get('flavour')
    wanted = settings[PREFIX + 'module_type']
    reasons = start.get('open_required_reasons') or []
    if reasons:
        expected = 'open kernel modules ({0})'.format(reasons[0])
        if flavour == 'open' and module.get('loaded'):
            _plan.set_check(out, check, expected, 'open modules loaded')
        elif not module.get('loaded'):
            _plan.set_check(out, check, expected)
            _drift(out, check, 'no nvidia kernel module loaded')
        else:
            _plan.set_check(out, check, expected)
            _drift(out, check, '{0} modules loaded; Blackwell and newer GPUs need the open ones ({1})'.format(
                flavour or 'unknown', '; '.join(reasons)))
        return
    expected = '{0} kernel modules ({1}module_type)'.format(wanted, PREFIX)
    if not module.get('loaded') or not flavour:
        _plan.set_check(out, check, expected, skip='no nvidia kernel module loaded')
    elif flavour != wanted:
        _plan.set_check(out, check, expected)
        _drift(out, check, '{0} modules loaded, {1}module_type={2} (the role reboots into them)'.format(
            flavour, PREFIX, wanted), level='warn')
    else:
        _plan.set_check(out, check, expected, '{0} modules loaded'.format(flavour))


def _persistenced(out, start, facts, settings, units, files):
    check = 'driver.persistenced'
    if not settings[PREFIX + 'persistenced']:
        _plan.set_check(out, check, 'not managed ({0}persistenced false)'.format(PREFIX), skip='not checked')
        return
    expected = 'nvidia-persistenced enabled and running'
    if not _has_gpus(facts):
        _plan.set_check(out, check, expected, skip='no NVIDIA GPU on the PCI bus')
        return
    persist = start['persistenced']
    seen = unit_text(units, PERSISTENCED_UNIT)
    # The role's rule (work_items): the packaged Ubuntu unit is static, started at boot by the wants link.
    enabled = _unit_is(units, PERSISTENCED_UNIT, not persist['dropin'], False)
    running = _unit_is(units, PERSISTENCED_UNIT, False, True)
    gpus = (facts.get('nvidia') or {}).get('gpus') or []
    off = [_gpu_label(g) for g in gpus if g.get('persistence_mode') is not True]
    if running and not enabled:
        _drift(out, check, seen + ' (not started at boot)')
    elif not running:
        if gpus and not off:
            _drift(out, check, seen + '; persistence mode set by the legacy nvidia-smi -pm 1 on all GPUs',
                   level='warn')
        elif gpus:
            _drift(out, check, seen + '; persistence mode off on {0}'.format(', '.join(off)))
        else:
            _drift(out, check, seen)
    if persist['dropin'] and not (
            _file_is(files, persist['dropin_path'].rsplit('/', 1)[0], mode='0755', kind='directory') and
            _file_is(files, persist['dropin_path'], persist['dropin_content']) and
            _file_is(files, persist['wants_link'], kind='link', target=persist['unit_path'])):
        _drift(out, check, 'the drop-in {0} (persistence mode on) or the wants link {1} is missing or '
                           'different'.format(persist['dropin_path'], persist['wants_link']))
    mode = settings[PREFIX + 'persistence_conflicts']
    if start.get('persistence_conflicts') and mode in ('disable', 'fail'):
        _drift(out, check, '{0} also set persistence mode and conflict with nvidia-persistenced ({1}'
                           'persistence_conflicts={2})'.format(', '.join(start['persistence_conflicts']), PREFIX,
                                                               mode))
    _plan.set_check(out, check, expected, '' if _plan.drift_for(out, check) else seen)


def _fabric(out, start, facts, settings, units):
    check = 'fabric.manager'
    expected = ('{0} active and enabled (on NVLink 5 systems it starts NVLSM itself); the GPUs\' fabric state is '
                'gpu.fabric\'s'.format(FABRIC_UNIT))
    kernel_state = facts.get('kernel_state') or {}
    if not isinstance(kernel_state.get('pci'), dict):
        _plan.set_check(out, check, expected, skip='kernel facts were not gathered')
        return
    fabric = start['fabric']
    found = fabric_text(kernel_state, fabric['kind'])
    mode = settings[PREFIX + 'fabricmanager']
    if not fabric['fabricmanager']:
        # Not wanted (auto on a node without NVSwitch, or never): the role removes what is installed of it.
        names = fabric_package_names(start['family'])
        stale = [name for name in start['extras']['remove'] if names.match(name)]
        if stale:
            _plan.set_check(out, check, expected)
            _drift(out, check, '{0}; {1} installed, not wanted ({2}fabricmanager={3}): the role removes {4}'.format(
                found, ', '.join(stale), PREFIX, mode, 'them' if len(stale) > 1 else 'it'), level='warn')
        elif mode == 'never':
            _plan.set_check(out, check, 'not managed ({0}fabricmanager never)'.format(PREFIX),
                            skip='{0}; not managed ({1}fabricmanager never)'.format(found, PREFIX))
        else:
            _plan.set_check(out, check, expected, skip=found)
        return
    seen = '{0}; {1}'.format(found, unit_text(units, FABRIC_UNIT))
    if not _unit_is(units, FABRIC_UNIT, True, True):
        _plan.set_check(out, check, expected)
        _drift(out, check, seen)
    else:
        _plan.set_check(out, check, expected, seen)
