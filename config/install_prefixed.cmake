# Run by `cmake --install` and CPack (config/CMakeLists.txt sets the WHARF_* variables): the
# files whose place or content depends on the prefix chosen at install time.
#   prefix /usr (the .deb):  /etc/wharf/wharfd.toml, /lib/systemd/system/wharfd.service
#   another prefix P:        P/etc/wharf/wharfd.toml, P/lib/systemd/system/wharfd.service,
#                            the unit's paths rewritten to P
# file(INSTALL) adds DESTDIR and records each file in the install manifest.
set(prefix "${CMAKE_INSTALL_PREFIX}")
if(prefix STREQUAL "/usr")
  set(etc_dir /etc)
  set(unit_dir /lib/systemd/system)
else()
  set(etc_dir "${prefix}/etc")
  set(unit_dir "${prefix}/lib/systemd/system")
endif()
set(work "${WHARF_CONFIG_BUILD_DIR}/install")

file(INSTALL DESTINATION "${etc_dir}/wharf" TYPE FILE
     FILES "${WHARF_CONFIG_BUILD_DIR}/system/wharfd.toml")

file(READ "${WHARF_SOURCE_DIR}/config/wharfd.service" unit)
string(REPLACE "/usr/sbin/wharfd" "${prefix}/${WHARF_SBINDIR}/wharfd" unit "${unit}")
string(REPLACE "/etc/wharf/" "${etc_dir}/wharf/" unit "${unit}")
string(REPLACE "/usr/share/doc/wharf/" "${prefix}/${WHARF_DOCDIR}/" unit "${unit}")
file(WRITE "${work}/wharfd.service" "${unit}")
file(INSTALL DESTINATION "${unit_dir}" TYPE FILE FILES "${work}/wharfd.service")

configure_file("${WHARF_SOURCE_DIR}/config/wharf-client.pc.in" "${work}/wharf-client.pc" @ONLY)
file(INSTALL DESTINATION "${prefix}/${WHARF_LIBDIR}/pkgconfig" TYPE FILE
     FILES "${work}/wharf-client.pc")
